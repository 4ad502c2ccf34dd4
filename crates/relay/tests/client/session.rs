//! The interactive session as a terminal tool (issue 43): the line editor (history recalled with
//! the up arrow, a multi-line message), slash commands that never reach the relay, an edit
//! approved from its diff, a scoped "always", the message put back after a failed leg, and `-c`
//! sending the same prefix upstream. The real binary in a tmux pane against a real relay; every
//! wait polls the screen or the upstream with a deadline.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::*;
use crate::tmux::Tmux;

pub const PANE: &str = "%0";

/// The status line the editor draws under the prompt once a leg has reported its usage.
pub fn is_status(line: &str) -> bool {
    line.contains(" in / ") && line.contains(" out · ") && line.contains("% cached")
}

/// The session waits for a message: the last line on the screen (under it, the status line) is
/// its prompt.
pub fn at_prompt(screen: &str) -> bool {
    tail(screen, 1) == [">"]
}

/// The last `n` lines with text on the screen, the status line under the prompt left out.
pub fn tail(screen: &str, n: usize) -> Vec<String> {
    let mut lines: Vec<String> = screen
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty() && !is_status(l))
        .take(n)
        .map(str::to_owned)
        .collect();
    lines.reverse();
    lines
}

/// The editor holds the two-line message, recalled from the history.
pub fn recalled(screen: &str) -> bool {
    tail(screen, 2) == ["> first line \\", "second line"]
}

/// `relay agent <args>` in a pane, in `cwd`, with its own data folder under the relay's dir.
pub fn session(relay: &Relay, cwd: &Path, args: &str, name: &str) -> Tmux {
    session_with(relay, cwd, args, name, &[])
}

/// As `session`, with more environment (a token, `NO_COLOR`).
pub fn session_with(
    relay: &Relay,
    cwd: &Path,
    args: &str,
    name: &str,
    env: &[(&str, &str)],
) -> Tmux {
    let dir = relay.dir.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut tmux = Command::new("tmux");
    let mut run = Run::new(relay, cwd).env(
        "XDG_DATA_HOME",
        relay.dir.path().join("data").to_str().unwrap(),
    );
    for (k, v) in env {
        run = run.env(k, v);
    }
    tmux.env_remove("NO_COLOR");
    run.configure(&mut tmux);
    Tmux::start_from(
        tmux,
        &dir,
        &format!("'{BIN}' agent {args}; echo \"[relay exited with $?]\""),
    )
}

/// The user messages of upstream request `n`, in order.
pub fn users(relay: &Relay, n: usize) -> Vec<String> {
    relay.upstream.requests()[n]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn history_multi_line_and_slash_commands_in_the_line_editor() {
    let relay = Relay::open(vec![text("first answer"), text("second answer")]).await;
    let p = project(None);
    let term = session(&relay, p.path(), "", "t1");
    let screen = term.wait_until(PANE, "the prompt", at_prompt).await;
    assert!(
        screen.contains("worker tools"),
        "memory by default: {screen}"
    );

    // /help lists the commands and is not sent; an unknown command is an error, not a message.
    term.send_keys(PANE, &["/help", "Enter"]);
    term.wait_for(PANE, "/permissions").await;
    term.send_keys(PANE, &["/frobnicate now", "Enter"]);
    let screen = term.wait_for(PANE, "unknown command /frobnicate").await;
    for c in ["/model", "/memory", "/cost", "/resume", "/clear", "/exit"] {
        assert!(screen.contains(c), "/help lists {c}: {screen}");
    }
    // Tab completes a command.
    term.send_keys(PANE, &["/he", "Tab"]);
    term.wait_until(PANE, "the completed command", |s| {
        s.lines().rev().find(|l| !l.trim().is_empty()) == Some("> /help")
    })
    .await;
    term.send_keys(PANE, &["C-u"]);
    assert!(
        relay.upstream.requests().is_empty(),
        "no slash command reached the relay"
    );

    // A trailing backslash continues the message on the next line.
    term.send_keys(PANE, &["first line \\", "Enter", "second line", "Enter"]);
    term.wait_until(PANE, "the first answer", |s| {
        s.contains("first answer") && at_prompt(s)
    })
    .await;
    assert_eq!(users(&relay, 0), ["first line \nsecond line"]);
    assert_eq!(
        relay
            .upstream
            .tool_names(0)
            .iter()
            .filter(|n| *n == "remember" || *n == "recall")
            .count(),
        2,
        "the worker tools are offered"
    );

    // The up arrow brings the last message back whole; Enter sends it again.
    term.send_keys(PANE, &["Up"]);
    term.wait_until(PANE, "the recalled message", recalled)
        .await;
    term.send_keys(PANE, &["Enter"]);
    term.wait_until(PANE, "the second answer", |s| {
        s.contains("second answer") && at_prompt(s)
    })
    .await;
    assert_eq!(
        users(&relay, 1),
        ["first line \nsecond line", "first line \nsecond line"]
    );
    // The status line after an answer: the model and the tokens the relay reported.
    // Drawn under the prompt, which may come a moment before it: waited for, not captured once.
    let screen = term
        .wait_for(PANE, "scripted · 20 in / 4 out · 0% cached")
        .await;
    assert!(
        screen.contains("scripted · 20 in / 4 out · 0% cached"),
        "{screen}"
    );
    term.send_keys(PANE, &["C-d"]);
    term.wait_for(PANE, "[relay exited with 0]").await;

    // The history is kept per project, readable by the user only, and a new session has it.
    let dir = relay.dir.path().join("data/relay/history");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let term = session(&relay, p.path(), "", "t2");
    term.wait_until(PANE, "the prompt", at_prompt).await;
    term.send_keys(PANE, &["Up"]);
    term.wait_until(PANE, "the recalled message", recalled)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edit_is_approved_from_its_diff_and_always_is_scoped() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![(
            "e1",
            "edit_file",
            json!({"path": "src/lib.rs", "old_string": "old line", "new_string": "new line"}),
        )]),
        Reply::Tools(vec![(
            "c1",
            "run_command",
            json!({"command": "cargo test -q"}),
        )]),
        Reply::Tools(vec![
            ("c2", "run_command", json!({"command": "cargo test --lib"})),
            ("c3", "run_command", json!({"command": "rm -f victim.txt"})),
        ]),
        text("all done"),
    ])
    .await;
    let p = project(None);
    write(p.path(), "src/lib.rs", "fn a() {}\nold line\nfn b() {}\n");
    write(p.path(), "victim.txt", "keep me");
    let term = session(&relay, p.path(), "'fix it'", "t1");

    // The edit: a unified diff against the file on disk, then the question.
    let screen = term.wait_for(PANE, "[y/n/always]").await;
    assert!(screen.contains("changes src/lib.rs"), "{screen}");
    assert!(screen.contains("@@ -1,3 +1,3 @@"), "{screen}");
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "- old line")
        .expect(&screen);
    assert_eq!(lines[at + 1], "+ new line", "{screen}");
    assert!(lines.contains(&"  fn a() {}"), "{screen}");
    assert!(
        screen.contains("always = allow Write(src/lib.rs)"),
        "{screen}"
    );
    // Coloured: the removal red, the addition green.
    let styled = term.capture_styled(PANE);
    assert!(styled.contains("\x1b[31m- old line"), "{styled}");
    assert!(styled.contains("\x1b[32m+ new line"), "{styled}");
    term.send_keys(PANE, &["y", "Enter"]);

    // `always` for `cargo test -q` is a rule for `cargo test`, not for every command.
    let screen = term
        .wait_until(PANE, "the command's question", |s| {
            s.matches("[y/n/always]").count() == 2
        })
        .await;
    assert!(
        screen.contains("always = allow Bash(cargo test:*)"),
        "{screen}"
    );
    term.send_keys(PANE, &["always", "Enter"]);
    // `cargo test --lib` runs without a question; `rm` is asked about, and declined.
    let screen = term
        .wait_until(PANE, "the rm question", |s| {
            s.matches("[y/n/always]").count() == 3
        })
        .await;
    assert!(screen.contains("allowed by Bash(cargo test:*)"), "{screen}");
    assert!(
        screen.contains("allow run_command {\"command\":\"rm -f victim.txt\"}"),
        "{screen}"
    );
    term.send_keys(PANE, &["n", "Enter"]);
    term.wait_until(PANE, "the answer", |s| {
        s.contains("all done") && at_prompt(s)
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(p.path().join("src/lib.rs")).unwrap(),
        "fn a() {}\nnew line\nfn b() {}\n"
    );
    assert!(p.path().join("victim.txt").exists(), "rm was declined");
    let r = relay.upstream.tool_results(3);
    assert!(r[0].1.starts_with("edited src/lib.rs"), "{r:?}");
    assert!(r[1].1.starts_with("exit_code="), "cargo test ran: {r:?}");
    assert!(
        r[2].1.starts_with("exit_code="),
        "cargo test --lib ran: {r:?}"
    );
    assert_eq!(r[3].1, "not run: the user declined this call.");

    // /permissions lists the rule and removes it.
    term.send_keys(PANE, &["/permissions", "Enter"]);
    term.wait_for(PANE, "1. Bash(cargo test:*)  (session)")
        .await;
    term.send_keys(PANE, &["/permissions remove 1", "Enter"]);
    term.wait_for(PANE, "removed Bash(cargo test:*)").await;
    term.send_keys(PANE, &["/permissions", "Enter"]);
    term.wait_for(PANE, "no rules:").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_leg_puts_the_message_back_and_c_continues_with_the_same_prefix() {
    let relay = Relay::open(vec![
        Reply::Cut,
        text("first answer"),
        text("second answer"),
    ])
    .await;
    let p = project(None);
    let term = session(&relay, p.path(), "", "t1");
    term.wait_until(PANE, "the prompt", at_prompt).await;
    term.send_keys(PANE, &["please keep this message", "Enter"]);
    // The leg fails; the message is back at the prompt, ready to send again.
    let screen = term
        .wait_until(PANE, "the restored message", |s| {
            s.contains("the relay reported an error during the leg")
                && tail(s, 1) == ["> please keep this message"]
        })
        .await;
    assert!(screen.contains("your message is back"), "{screen}");
    term.send_keys(PANE, &["Enter"]);
    term.wait_until(PANE, "the first answer", |s| {
        s.contains("first answer") && at_prompt(s)
    })
    .await;
    assert_eq!(users(&relay, 1), ["please keep this message"]);
    term.send_keys(PANE, &["C-d"]);
    term.wait_for(PANE, "[relay exited with 0]").await;

    // The conversation was saved, private to the user.
    let sessions = relay.dir.path().join("data/relay/sessions");
    let project_dir = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = std::fs::read_dir(&project_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // `-c` continues it: the next request starts with exactly what was sent before, then the answer.
    let term = session(&relay, p.path(), "-c", "t2");
    let screen = term.wait_until(PANE, "the prompt", at_prompt).await;
    assert!(screen.contains("resumed "), "{screen}");
    term.send_keys(PANE, &["and a follow-up", "Enter"]);
    term.wait_until(PANE, "the second answer", |s| {
        s.contains("second answer") && at_prompt(s)
    })
    .await;
    let requests = relay.upstream.requests();
    let before = requests[1]["messages"].as_array().unwrap();
    let after = requests[2]["messages"].as_array().unwrap();
    assert_eq!(&after[..before.len()], &before[..], "the same prefix");
    assert_eq!(after[before.len()]["role"], "assistant");
    assert_eq!(after[before.len()]["content"], Value::from("first answer"));
    assert_eq!(
        after[before.len() + 1]["content"],
        Value::from("and a follow-up")
    );
    assert_eq!(after.len(), before.len() + 2);
}
