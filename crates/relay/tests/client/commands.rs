//! Slash commands and the live view in a real terminal (issue 43): `/cost` against the ledger,
//! `/memory`, `/model`, `/role`, `/clear`, `/resume`, and the answer rendered as Markdown (plain
//! with `NO_COLOR`).

use serde_json::Value;

use crate::session::{PANE, at_prompt, session, session_with, users};
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn cost_shows_the_ledgers_figures_and_the_units_left() {
    let relay = Relay::with_auth(vec![text("counted answer")], "default_limit = 50").await;
    let token = relay.signup("cost@example.com").await;
    let p = project(None);
    let term = session_with(&relay, p.path(), "", "t1", &[("RELAY_TOKEN", &token)]);
    term.wait_until(PANE, "the prompt", at_prompt).await;
    term.send_keys(PANE, &["count this", "Enter"]);
    term.wait_until(PANE, "the answer", |s| {
        s.contains("counted answer") && at_prompt(s)
    })
    .await;
    // The ledger as the API shows it, once the leg's record is written.
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let leg = loop {
        let page: Value = http
            .get(format!("{}/v1/usage/legs", relay.url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(leg) = page["items"].as_array().and_then(|a| a.first()) {
            break leg.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no ledger record");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let me: Value = http
        .get(format!("{}/v1/me", relay.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    term.send_keys(PANE, &["/cost", "Enter"]);
    let screen = term.wait_for(PANE, "left: ").await;
    assert!(
        screen.contains("this session: 1 calls, 10 tokens in (0 cached, 0%), 2 out"),
        "{screen}"
    );
    let ledger = format!(
        "relay's ledger: 1 of 1 calls recorded, {} in ({} cached), {} out",
        leg["input_tokens"], leg["cached_input_tokens"], leg["output_tokens"]
    );
    assert!(screen.contains(&ledger), "{ledger} in {screen}");
    assert!(
        screen.contains(&format!("left: {} units", me["remaining"])),
        "{screen}"
    );
    // The status line is drawn under the next prompt, after `/cost`'s own lines.
    let status = format!("{} units left", me["remaining"]);
    let screen = term.wait_for(PANE, &status).await;
    assert!(
        screen.contains(&status),
        "the status line shows the units left: {screen}"
    );
    assert_eq!(relay.upstream.requests().len(), 1, "/cost is not a message");
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_model_role_clear_and_resume_commands() {
    let relay = Relay::open(vec![text("one"), text("two"), text("three")]).await;
    let p = project(None);
    let term = session(&relay, p.path(), "", "t1");
    term.wait_until(PANE, "the prompt", at_prompt).await;

    // /memory: add, list, search, forget, all through the relay's memory API.
    term.send_keys(PANE, &["/memory add the tests use tmux", "Enter"]);
    term.wait_for(PANE, "remembered").await;
    term.send_keys(PANE, &["/memory add deploys go through CI", "Enter"]);
    term.wait_until(PANE, "the second note", |s| {
        s.matches("remembered").count() == 2
    })
    .await;
    term.send_keys(PANE, &["/memory search TMUX", "Enter"]);
    let screen = term.wait_for(PANE, "  the tests use tmux").await;
    let id = screen
        .lines()
        .find(|l| l.ends_with("  the tests use tmux"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    assert!(
        !screen.contains("  deploys go through CI"),
        "search shows matching notes only: {screen}"
    );
    term.send_keys(PANE, &[&format!("/memory forget {id}"), "Enter"]);
    term.wait_for(PANE, "forgotten").await;
    term.send_keys(PANE, &["/memory", "Enter"]);
    term.wait_until(PANE, "the list after forget", |s| {
        s.matches("  deploys go through CI").count() == 1
            && s.matches("  the tests use tmux").count() == 1
            && at_prompt(s)
    })
    .await;

    // /model lists the relay's models and switches; an unknown one is refused.
    term.send_keys(PANE, &["/model", "Enter"]);
    term.wait_for(PANE, "  scripted").await;
    term.send_keys(PANE, &["/model nope", "Enter"]);
    term.wait_for(PANE, "the relay has no model nope").await;
    term.send_keys(PANE, &["/model scripted", "Enter"]);
    term.wait_for(PANE, "model scripted from the next message on")
        .await;
    // /role changes the tool set.
    term.send_keys(PANE, &["/role base", "Enter"]);
    term.wait_for(PANE, "tool set base").await;
    term.send_keys(PANE, &["hello", "Enter"]);
    term.wait_until(PANE, "the first answer", |s| {
        s.contains("\none\n") && at_prompt(s)
    })
    .await;
    let first = &relay.upstream.requests()[0];
    assert!(
        !relay
            .upstream
            .tool_names(0)
            .contains(&"remember".to_owned()),
        "{first}"
    );
    // /clear: the next message starts a new conversation.
    term.send_keys(PANE, &["/clear", "Enter"]);
    term.wait_for(PANE, "new conversation").await;
    term.send_keys(PANE, &["fresh start", "Enter"]);
    term.wait_until(PANE, "the second answer", |s| {
        s.contains("\ntwo\n") && at_prompt(s)
    })
    .await;
    assert_eq!(users(&relay, 1), ["fresh start"]);

    // /resume lists both conversations and takes up the one picked.
    term.send_keys(PANE, &["/resume", "Enter"]);
    let screen = term.wait_for(PANE, "resume which? [1-2").await;
    assert!(
        screen.contains("\"hello\"") || screen.contains("· hello"),
        "{screen}"
    );
    let pick = screen
        .lines()
        .find(|l| l.ends_with("· hello"))
        .and_then(|l| l.trim().split('.').next())
        .unwrap()
        .to_owned();
    term.send_keys(PANE, &[&pick, "Enter"]);
    term.wait_for(PANE, "\"hello\"").await;
    term.send_keys(PANE, &["and again", "Enter"]);
    term.wait_until(PANE, "the third answer", |s| {
        s.contains("\nthree\n") && at_prompt(s)
    })
    .await;
    assert_eq!(users(&relay, 2), ["hello", "and again"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn markdown_is_rendered_on_a_colour_terminal_and_not_with_no_color() {
    let answer = "# Plan\n- step `one`\nplain words\n";
    let relay = Relay::open(vec![text(answer), text(answer)]).await;
    let p = project(None);
    let term = session(&relay, p.path(), "'show the plan'", "t1");
    let screen = term
        .wait_until(PANE, "the rendered answer", |s| {
            s.contains("plain words") && at_prompt(s)
        })
        .await;
    let lines: Vec<&str> = screen.lines().collect();
    assert!(
        lines.contains(&"Plan") && lines.contains(&"• step one"),
        "{screen}"
    );
    assert!(!screen.contains("# Plan"), "{screen}");
    let styled = term.capture_styled(PANE);
    // tmux writes bold as `ESC[1m` or `ESC[0;1m`, maybe with colour resets after it.
    let heading = styled.lines().find(|l| l.ends_with("Plan")).unwrap_or("");
    assert!(
        heading.contains(";1m") || heading.contains("[1m"),
        "the heading is bold: {styled}"
    );

    let term = session_with(
        &relay,
        p.path(),
        "'show the plan'",
        "t2",
        &[("NO_COLOR", "1")],
    );
    let screen = term
        .wait_until(PANE, "the plain answer", |s| {
            s.contains("plain words") && at_prompt(s)
        })
        .await;
    assert!(
        screen.contains("# Plan\n- step `one`\nplain words"),
        "{screen}"
    );
    assert!(
        !term.capture_styled(PANE).contains("\x1b[1m"),
        "no styles with NO_COLOR"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn project_settings_rules_apply_once_accepted() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![(
            "s1",
            "run_command",
            serde_json::json!({"command": "touch accepted.txt"}),
        )]),
        text("touched"),
        Reply::Tools(vec![(
            "s2",
            "run_command",
            serde_json::json!({"command": "touch from-p.txt"}),
        )]),
        text("touched again"),
        Reply::Tools(vec![(
            "s3",
            "run_command",
            serde_json::json!({"command": "touch changed.txt"}),
        )]),
        text("refused"),
    ])
    .await;
    let p = project(None);
    write(
        p.path(),
        ".relay/settings.toml",
        "[permissions]\nallow = [\"Bash(touch:*)\"]\n",
    );
    // The first interactive session asks once; accepted, the rule allows the call.
    let term = session(&relay, p.path(), "'make the file'", "t1");
    let screen = term
        .wait_for(PANE, "accept these rules for this project? [y/n]")
        .await;
    assert!(screen.contains("  Bash(touch:*)"), "{screen}");
    term.send_keys(PANE, &["y", "Enter"]);
    let screen = term
        .wait_until(PANE, "the answer", |s| {
            s.contains("touched") && at_prompt(s)
        })
        .await;
    assert!(screen.contains("allowed by Bash(touch:*)"), "{screen}");
    assert!(!screen.contains("[y/n/always]"), "{screen}");
    assert!(p.path().join("accepted.txt").exists());

    // `-p` without a terminal: the accepted rule applies there too.
    let data = relay.dir.path().join("data");
    let run = Run::new(&relay, p.path()).env("XDG_DATA_HOME", data.to_str().unwrap());
    let out = run.run(&["agent", "-p", "again"], "").await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(p.path().join("from-p.txt").exists(), "{}", stderr(&out));

    // A changed file is not accepted any more: ignored, and said so.
    write(
        p.path(),
        ".relay/settings.toml",
        "[permissions]\nallow = [\"Bash(touch:*)\", \"Bash(rm:*)\"]\n",
    );
    let out = run.run(&["agent", "-p", "once more"], "").await;
    assert!(
        stderr(&out).contains("2 allow rules not accepted yet"),
        "{}",
        stderr(&out)
    );
    assert!(!p.path().join("changed.txt").exists());
    assert!(
        relay.upstream.tool_results(5)[0].1.starts_with("not run:"),
        "{:?}",
        relay.upstream.tool_results(5)
    );
}
