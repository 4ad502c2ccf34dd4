//! Each tool of the catalogue run by `relay agent -p … --yes`, checked through the results the
//! next leg carries back and the files on disk.

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn file_tools_run_locally_and_every_call_is_answered_in_order() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![
            ("c1", "read_file", json!({"path": "a.txt", "limit": 2})),
            ("c2", "list_dir", json!({"path": "."})),
            ("c3", "grep", json!({"pattern": "needle"})),
            ("c4", "find_files", json!({"pattern": "*.rs"})),
            (
                "c5",
                "write_file",
                json!({"path": "new/b.txt", "content": "fresh"}),
            ),
            ("c6", "read_file", json!({"path": "missing.txt"})),
            ("c7", "read_file", json!({"path": "a.txt", "offset": 2})),
        ]),
        text("all done"),
    ])
    .await;
    let p = project(None);
    write(p.path(), "a.txt", "one\ntwo needle\nthree\nfour\n");
    write(p.path(), "src/main.rs", "fn main() {} // needle\n");
    write(p.path(), "target/gen.rs", "needle in ignored\n");
    write(p.path(), ".gitignore", "target/\n");
    let out = Run::new(&relay, p.path())
        .run(&["agent", "--yes", "-p", "go"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "all done");

    let results = relay.upstream.tool_results(1);
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]);
    let r = |i: usize| results[i].1.as_str();
    assert!(r(0).starts_with("one\ntwo needle\n"), "{}", r(0));
    assert!(
        r(0).contains("offset=2"),
        "rule 1: resume offset named: {}",
        r(0)
    );
    assert!(r(1).contains("a.txt") && r(1).contains("src/"), "{}", r(1));
    assert!(
        r(2).contains("a.txt:2:two needle") && r(2).contains("src/main.rs:1:"),
        "{}",
        r(2)
    );
    assert!(
        !r(2).contains("target/"),
        "grep respects .gitignore: {}",
        r(2)
    );
    assert_eq!(r(3), "src/main.rs", "find_files respects .gitignore");
    assert!(r(4).starts_with("wrote 5 bytes"), "{}", r(4));
    assert_eq!(
        std::fs::read_to_string(p.path().join("new/b.txt")).unwrap(),
        "fresh"
    );
    assert!(
        r(5).starts_with("error:"),
        "a failing call still gets its result: {}",
        r(5)
    );
    assert_eq!(
        r(6),
        "three\nfour\n",
        "resuming at the offset reads the rest"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_file_needs_a_unique_match_unless_replace_all() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![
            (
                "e1",
                "edit_file",
                json!({"path": "f.txt", "old_string": "x", "new_string": "y"}),
            ),
            (
                "e2",
                "edit_file",
                json!({"path": "f.txt", "old_string": "absent", "new_string": "y"}),
            ),
            (
                "e3",
                "edit_file",
                json!({"path": "f.txt", "old_string": "unique", "new_string": "UNIQUE"}),
            ),
            (
                "e4",
                "edit_file",
                json!({"path": "f.txt", "old_string": "x", "new_string": "z", "replace_all": true}),
            ),
        ]),
        text("edited"),
    ])
    .await;
    let p = project(None);
    write(p.path(), "f.txt", "x unique x\n");
    let out = Run::new(&relay, p.path())
        .run(&["agent", "--yes", "-p", "edit"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let r = relay.upstream.tool_results(1);
    assert!(
        r[0].1.contains("occurs 2 times") && r[0].1.starts_with("error:"),
        "{}",
        r[0].1
    );
    assert!(r[1].1.contains("not found"), "{}", r[1].1);
    assert!(r[2].1.contains("1 replacement"), "{}", r[2].1);
    assert!(r[3].1.contains("2 replacements"), "{}", r[3].1);
    assert_eq!(
        std::fs::read_to_string(p.path().join("f.txt")).unwrap(),
        "z UNIQUE z\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_command_reports_the_exit_code_and_combined_output_and_times_out() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![
            (
                "r1",
                "run_command",
                json!({"command": "echo out; echo err >&2; pwd; exit 3"}),
            ),
            ("r2", "run_command", json!({"command": "sleep 30"})),
            (
                "r3",
                "run_command",
                json!({"command": "yes 0123456789 | head -c 100000"}),
            ),
        ]),
        text("ran"),
    ])
    .await;
    let p = project(None);
    let out = Run::new(&relay, p.path())
        .env("RELAY_COMMAND_TIMEOUT_SECS", "1")
        .env("SHELL", "/bin/sh")
        .run(&["agent", "--yes", "-p", "run"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let r = relay.upstream.tool_results(1);
    let root = p.path().canonicalize().unwrap();
    assert_eq!(
        r[0].1,
        format!("exit_code=3\nout\nerr\n{}\n", root.display())
    );
    assert!(
        r[1].1.starts_with("exit_code=124\n") && r[1].1.contains("timed out after 1 s"),
        "{}",
        r[1].1
    );
    assert!(
        r[2].1.starts_with("exit_code=0\n0123456789"),
        "{}",
        &r[2].1[..40]
    );
    assert!(
        r[2].1.contains("[output cut: 100000 bytes in all"),
        "capped with a note"
    );
    assert!(r[2].1.len() < 40_000);
}

#[tokio::test(flavor = "multi_thread")]
async fn web_search_and_write_plan() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![
            ("w1", "web_search", json!({"query": "life"})),
            (
                "w2",
                "write_plan",
                json!({"title": "Fix the Login bug!", "markdown": "- step one\n- step two"}),
            ),
        ]),
        text("planned"),
    ])
    .await;
    let p = project(None);
    let out = Run::new(&relay, p.path())
        .run(&["agent", "-p", "plan"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let r = relay.upstream.tool_results(1);
    assert!(
        r[0].1.contains("About life") && r[0].1.contains("https://example.org/answer"),
        "{}",
        r[0].1
    );
    assert_eq!(r[1].1, "plan written to .relay/plans/fix-the-login-bug.md");
    let plan = std::fs::read_to_string(p.path().join(".relay/plans/fix-the-login-bug.md")).unwrap();
    assert_eq!(plan, "# Fix the Login bug!\n\n- step one\n- step two");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_pdf_uses_the_builtin_floor_or_the_engine_found() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![(
            "p1",
            "create_pdf",
            json!({"content": "# Heading\n\nSome text.\n\n- item\n\n```\ncode()\n```", "output_path": "out/doc.pdf", "title": "Doc"}),
        )]),
        text("made"),
        Reply::Tools(vec![("p2", "create_pdf", json!({"content": "hello", "output_path": "other.pdf"}))]),
        text("made again"),
    ])
    .await;
    let p = project(None);
    // No engine on PATH: the built-in renderer.
    let empty = tempfile::tempdir().unwrap();
    let out = Run::new(&relay, p.path())
        .env("PATH", empty.path().to_str().unwrap())
        .env("SHELL", "/bin/sh")
        .run(&["agent", "--yes", "-p", "pdf"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let r = relay.upstream.tool_results(1);
    assert_eq!(r[0].1, "wrote out/doc.pdf with the built-in renderer");
    let pdf = std::fs::read(p.path().join("out/doc.pdf")).unwrap();
    assert!(pdf.starts_with(b"%PDF-"));
    let text = String::from_utf8_lossy(&pdf);
    for drawn in ["(Heading) Tj", "(Some text.) Tj", "code", "/Courier"] {
        assert!(text.contains(drawn), "{drawn} missing");
    }

    // An engine on PATH (a stand-in wkhtmltopdf that writes a PDF) is preferred and named.
    let bin = tempfile::tempdir().unwrap();
    let engine = bin.path().join("wkhtmltopdf");
    std::fs::write(
        &engine,
        "#!/bin/sh\nfor a; do out=$a; done\nprintf '%%PDF-1.4 stand-in' > \"$out\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Run::new(&relay, p.path())
        .env("PATH", bin.path().to_str().unwrap())
        .run(&["agent", "--yes", "-p", "pdf"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let r = relay.upstream.tool_results(3);
    assert_eq!(r[0].1, "wrote other.pdf with wkhtmltopdf");
    assert_eq!(
        std::fs::read(p.path().join("other.pdf")).unwrap(),
        b"%PDF-1.4 stand-in"
    );
}
