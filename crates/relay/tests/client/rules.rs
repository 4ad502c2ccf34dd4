//! Approvals, confinement to the project root, the project id and the role sets.

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn without_yes_and_without_a_terminal_changes_are_not_run_and_the_model_is_told() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![
            ("a1", "write_file", json!({"path": "w.txt", "content": "x"})),
            ("a2", "run_command", json!({"command": "touch ran.txt"})),
            ("a3", "read_file", json!({"path": "r.txt"})),
        ]),
        text("could not"),
    ])
    .await;
    let p = project(None);
    write(p.path(), "r.txt", "readable\n");
    let out = Run::new(&relay, p.path())
        .run(&["agent", "-p", "try"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let r = relay.upstream.tool_results(1);
    assert!(
        r[0].1.starts_with("not run:") && r[0].1.contains("--yes"),
        "{}",
        r[0].1
    );
    assert!(r[1].1.starts_with("not run:"), "{}", r[1].1);
    assert_eq!(r[2].1, "readable\n", "reads need no approval");
    assert!(!p.path().join("w.txt").exists() && !p.path().join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn interactive_approval_takes_yes_no_and_always() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![
            (
                "i1",
                "write_file",
                json!({"path": "yes.txt", "content": "1"}),
            ),
            (
                "i2",
                "write_file",
                json!({"path": "no.txt", "content": "2"}),
            ),
            ("i3", "run_command", json!({"command": "touch always1"})),
            ("i4", "run_command", json!({"command": "touch always2"})),
        ]),
        text("finished"),
    ])
    .await;
    let p = project(None);
    // The first message, then the answers: y, n, always (the second command is not asked).
    let out = Run::new(&relay, p.path())
        .run(&["agent", "do the things"], "y\nn\nalways\n")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("finished"));
    let r = relay.upstream.tool_results(1);
    assert!(r[0].1.starts_with("wrote"), "{}", r[0].1);
    assert_eq!(r[1].1, "not run: the user declined this call.");
    assert!(r[2].1.starts_with("exit_code=0") && r[3].1.starts_with("exit_code=0"));
    assert!(p.path().join("yes.txt").exists() && !p.path().join("no.txt").exists());
    assert!(p.path().join("always1").exists() && p.path().join("always2").exists());
    assert_eq!(
        stderr(&out).matches("[y/n/always]").count(),
        3,
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn paths_outside_the_root_are_refused_even_with_yes() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![
            ("o1", "read_file", json!({"path": "../secret.txt"})),
            (
                "o2",
                "write_file",
                json!({"path": "link/planted.txt", "content": "x"}),
            ),
            ("o3", "read_file", json!({"path": "link/secret.txt"})),
            ("o4", "list_dir", json!({"path": "/"})),
            (
                "o5",
                "create_pdf",
                json!({"content": "x", "output_path": "../x.pdf"}),
            ),
            (
                "o6",
                "edit_file",
                json!({"path": "sub/../../secret.txt", "old_string": "s", "new_string": "t"}),
            ),
        ]),
        text("refused"),
    ])
    .await;
    let outer = tempfile::tempdir().unwrap();
    let p = outer.path().join("proj");
    std::fs::create_dir(&p).unwrap();
    std::fs::create_dir(p.join("sub")).unwrap();
    write(outer.path(), "secret.txt", "s3cret\n");
    std::os::unix::fs::symlink(outer.path(), p.join("link")).unwrap();
    let out = Run::new(&relay, &p)
        .run(&["agent", "--yes", "-p", "escape"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    for (id, result) in relay.upstream.tool_results(1) {
        assert!(
            result.starts_with("error:") && result.contains("outside the project root"),
            "{id}: {result}"
        );
    }
    assert!(!outer.path().join("planted.txt").exists());
    assert!(!outer.path().join("x.pdf").exists());
    assert_eq!(
        std::fs::read_to_string(outer.path().join("secret.txt")).unwrap(),
        "s3cret\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_project_id_is_the_same_for_the_relay_and_remember_recall() {
    let remote = "git@example.com:team/app.git";
    let expected = project_id(remote);
    let relay = Relay::open(vec![
        Reply::Tools(vec![(
            "m1",
            "remember",
            json!({"note": "tests run with cargo nextest"}),
        )]),
        text("noted"),
        Reply::Tools(vec![("m2", "recall", json!({}))]),
        text("recalled"),
    ])
    .await;
    let p = project(Some(remote));
    std::fs::create_dir(p.path().join("sub")).unwrap();
    let run = Run::new(&relay, &p.path().join("sub"));
    let out = run
        .run(&["agent", "--role", "worker", "-p", "remember it"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("project {expected}")),
        "{}",
        stderr(&out)
    );
    // The leg carried the project: the relay's `start` named the id derived from git_remote.
    let out = run
        .run(&["agent", "--role", "worker", "-p", "what do you know"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    // The note stored under the client's id is injected by the relay under the id it derives.
    let system = relay.upstream.requests()[2]["messages"].to_string();
    assert!(system.contains("tests run with cargo nextest"), "{system}");
    assert!(
        stderr(&out).contains(&format!("project {expected}, 1 notes injected")),
        "{}",
        stderr(&out)
    );
    let r = relay.upstream.tool_results(3);
    assert_eq!(r[0].1, "- tests run with cargo nextest");
    let list = relay_client::Client::new(relay.url.as_str())
        .unwrap()
        .list_notes(&Default::default())
        .await
        .unwrap();
    assert_eq!(list.items[0].project_id, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn each_role_sends_exactly_its_tool_set_and_other_tools_are_refused() {
    use relay_wire::tools::{ToolRole, allowed_names};
    let relay = Relay::open(vec![]).await;
    let p = project(None);
    let run = Run::new(&relay, p.path());
    let roles = [
        (None, vec![]),
        (Some(ToolRole::Worker), vec!["--role", "worker"]),
        (Some(ToolRole::Orchestrator), vec!["--role", "orchestrator"]),
        (
            Some(ToolRole::AgentOrchestrator),
            vec!["--role", "agent_orchestrator"],
        ),
    ];
    for (i, (role, flag)) in roles.iter().enumerate() {
        let mut args = vec!["agent", "-p", "hi"];
        args.extend(flag);
        let out = run.run(&args, "").await;
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            relay.upstream.tool_names(i),
            allowed_names(*role),
            "{flag:?}"
        );
        let sent = relay.upstream.requests()[i].clone();
        assert_eq!(
            sent["tools"].as_array().unwrap().len(),
            allowed_names(*role).len()
        );
    }
    // A call for a tool the role was not given is answered with an error, not run.
    relay.upstream.push(Reply::Tools(vec![(
        "x1",
        "write_file",
        json!({"path": "w", "content": "x"}),
    )]));
    relay.upstream.push(text("ok"));
    let out = run
        .run(
            &[
                "agent",
                "--yes",
                "--role",
                "agent_orchestrator",
                "-p",
                "write",
            ],
            "",
        )
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let r = relay.upstream.tool_results(5);
    assert!(
        r[0].1.contains("not available in this session"),
        "{}",
        r[0].1
    );
    assert!(!p.path().join("w").exists());
}
