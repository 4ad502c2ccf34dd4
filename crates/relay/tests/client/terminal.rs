//! The interactive session as a user sees it: `relay agent` (no `-p`) in a real terminal (a tmux
//! pane, so a pseudo-terminal with line editing and ctrl-c as a signal), typed into with keys and
//! read back from the screen.

use std::process::Command;

use serde_json::json;

use crate::session::at_prompt;
use crate::support::*;
use crate::tmux::Tmux;

const PANE: &str = "%0";

/// Whether the first `text` in a styled capture is shown dim. tmux writes an attribute only where
/// it changes, so the state is followed from the start of the capture.
fn dimmed(styled: &str, text: &str) -> Option<bool> {
    let mut dim = false;
    let mut rest = styled;
    while !rest.is_empty() {
        if rest.starts_with(text) {
            return Some(dim);
        }
        if let Some(sgr) = rest.strip_prefix("\x1b[") {
            let end = sgr.find(|c: char| c.is_ascii_alphabetic())?;
            if sgr[end..].starts_with('m') {
                for p in sgr[..end].split(';') {
                    match p {
                        "" | "0" | "22" => dim = false,
                        "2" => dim = true,
                        _ => {}
                    }
                }
            }
            rest = &sgr[end + 1..];
        } else {
            let n = rest.chars().next().map_or(1, char::len_utf8);
            rest = &rest[n..];
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interactive_session_in_a_real_terminal() {
    let relay = Relay::open(vec![
        Reply::Stall,
        Reply::Tools(vec![(
            "w1",
            "write_file",
            json!({"path": "notes/hello.txt", "content": "written from the terminal"}),
        )]),
        Reply::Thinking("pondering the note", "the note is written"),
    ])
    .await;
    let p = project(None);
    let mut tmux = Command::new("tmux");
    Run::new(&relay, p.path()).configure(&mut tmux);
    // The pane's shell prints the agent's exit status itself: tmux sometimes marks a pane dead
    // before it has collected the status (`#{pane_dead_status}` stays empty). The shell traps
    // SIGINT with a handler, so ctrl-c reaches the agent and leaves the shell waiting for it.
    let term = Tmux::start_from(
        tmux,
        relay.dir.path(),
        &format!("trap true INT; '{BIN}' agent; echo \"[relay exited with $?]\""),
    );
    let screen = term.wait_until(PANE, "the prompt", at_prompt).await;
    assert!(
        screen.contains("relay agent on http://127.0.0.1:"),
        "{screen}"
    );

    // A long answer streams in while its leg is still open; ctrl-c cancels the leg only.
    term.send_keys(PANE, &["a long question", "Enter"]);
    term.wait_for(PANE, "thinking…").await;
    term.send_keys(PANE, &["C-c"]);
    relay.upstream.wait_dropped().await;
    let screen = term
        .wait_until(PANE, "the prompt after [cancelled]", |s| {
            s.contains("[cancelled]") && at_prompt(s)
        })
        .await;
    assert_eq!(term.exit_status(PANE), None, "{screen}");

    // The next message: a tool call shown with its arguments, asked about, approved with y, run.
    term.send_keys(PANE, &["write the note", "Enter"]);
    let screen = term.wait_for(PANE, "[y/n/always]").await;
    assert!(
        screen.contains("▸ write_file") && screen.contains("notes/hello.txt"),
        "{screen}"
    );
    assert!(screen.contains("allow write_file"), "{screen}");
    let note = p.path().join("notes/hello.txt");
    assert!(!note.exists(), "nothing is written before the answer");
    term.send_keys(PANE, &["y", "Enter"]);
    let screen = term
        .wait_until(PANE, "the answer, then the prompt", |s| {
            s.contains("the note is written") && at_prompt(s)
        })
        .await;
    // Reasoning is shown dimmed, the answer is not.
    assert!(
        screen.lines().any(|l| l == "the note is written"),
        "the answer starts on a line of its own after the reasoning: {screen}"
    );
    let styled = term.capture_styled(PANE);
    assert_eq!(
        dimmed(&styled, "pondering the note"),
        Some(true),
        "{styled}"
    );
    assert_eq!(
        dimmed(&styled, "the note is written"),
        Some(false),
        "{styled}"
    );
    assert_eq!(
        std::fs::read_to_string(&note).unwrap(),
        "written from the terminal",
        "{screen}"
    );
    assert_eq!(
        relay.upstream.tool_results(2),
        vec![(
            "w1".to_owned(),
            "wrote 25 bytes to notes/hello.txt".to_owned()
        )]
    );
    // The cancelled turn left nothing behind in the conversation.
    let users = relay.upstream.requests()[1]["messages"].to_string();
    assert!(
        users.contains("write the note") && !users.contains("a long question"),
        "{users}"
    );

    // ctrl-d at the prompt ends the session cleanly.
    term.send_keys(PANE, &["C-d"]);
    term.wait_for(PANE, "[relay exited with 0]").await;
}
