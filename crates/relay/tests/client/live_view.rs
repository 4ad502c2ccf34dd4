//! The live view in a real terminal (issue 43): the status line drawn under the prompt and
//! redrawn there after each answer (one on the screen, never a column of them; a plain line per
//! answer when the session is not on a terminal), and code blocks highlighted by their language
//! on a colour terminal, with no colour at all under `NO_COLOR`.

use crate::session::{PANE, at_prompt, is_status, session, session_with, tail};
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn the_status_line_is_redrawn_under_the_prompt_not_repeated() {
    let relay = Relay::open(vec![text("first answer"), text("second answer")]).await;
    let p = project(None);
    let term = session(&relay, p.path(), "", "t1");
    let screen = term.wait_until(PANE, "the prompt", at_prompt).await;
    assert!(!screen.lines().any(is_status), "no usage yet: {screen}");

    term.send_keys(PANE, &["one", "Enter"]);
    let screen = term
        .wait_until(PANE, "the first status line", |s| {
            s.contains("scripted · 10 in / 2 out · 0% cached") && at_prompt(s)
        })
        .await;
    // Under the prompt, the last line on the screen.
    let last = screen.lines().rev().find(|l| !l.trim().is_empty());
    assert_eq!(
        last,
        Some("scripted · 10 in / 2 out · 0% cached"),
        "{screen}"
    );

    // Typing keeps it under the line being typed; sending clears it; the next answer redraws it.
    term.send_keys(PANE, &["two"]);
    term.wait_until(PANE, "the typed message", |s| tail(s, 1) == ["> two"])
        .await;
    term.send_keys(PANE, &["Enter"]);
    let screen = term
        .wait_until(PANE, "the second status line", |s| {
            s.contains("scripted · 20 in / 4 out · 0% cached") && at_prompt(s)
        })
        .await;
    let shown: Vec<&str> = screen.lines().filter(|l| is_status(l)).collect();
    assert_eq!(
        shown,
        ["scripted · 20 in / 4 out · 0% cached"],
        "one status line after two legs: {screen}"
    );
    assert!(screen.contains("first answer") && screen.contains("second answer"));
    // ctrl-c at the prompt leaves no stale copy behind either.
    term.send_keys(PANE, &["three", "C-c"]);
    let screen = term
        .wait_until(PANE, "a fresh prompt", |s| {
            at_prompt(s) && s.contains("> three")
        })
        .await;
    assert_eq!(
        screen.lines().filter(|l| is_status(l)).count(),
        1,
        "{screen}"
    );

    // Not a terminal: one plain line per answer on standard error.
    let out = Run::new(&relay, p.path())
        .env(
            "XDG_DATA_HOME",
            relay.dir.path().join("data2").to_str().unwrap(),
        )
        .run(&["agent"], "three\nfour\n")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| is_status(l)).collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(!err.contains('\x1b'), "no escapes off a terminal: {err:?}");
}

const CODE: &str =
    "Here:\n```rust\nfn main() {\n    let greeting = \"hi\"; // say it\n}\n```\ndone";

/// The styled lines of the screen from the fence to the closing fence.
fn block(styled: &str) -> Vec<String> {
    styled
        .lines()
        .skip_while(|l| !l.contains("```rust"))
        .skip(1)
        .take_while(|l| !l.contains("```"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_block_is_highlighted_by_language_and_plain_with_no_color() {
    let relay = Relay::open(vec![text(CODE), text(CODE)]).await;
    let p = project(None);
    let term = session(&relay, p.path(), "'show code'", "t1");
    let screen = term
        .wait_until(PANE, "the answer", |s| s.contains("done") && at_prompt(s))
        .await;
    assert!(
        screen.contains("    let greeting = \"hi\"; // say it"),
        "{screen}"
    );
    let styled = term.capture_styled(PANE);
    let code = block(&styled);
    assert_eq!(code.len(), 3, "{styled}");
    // Tokens in different colours: the keyword, the string, the comment each open a style.
    let line = &code[1];
    let colours: std::collections::HashSet<&str> = line
        .split("\x1b[")
        .skip(1)
        .filter_map(|s| s.split_once('m').map(|x| x.0))
        .filter(|sgr| *sgr != "0" && *sgr != "39" && !sgr.is_empty())
        .collect();
    assert!(colours.len() >= 2, "several colours in {line:?}");
    assert!(line.contains("\x1b["), "{line:?}");

    let term = session_with(&relay, p.path(), "'show code'", "t2", &[("NO_COLOR", "1")]);
    let screen = term
        .wait_until(PANE, "the plain answer", |s| {
            s.contains("done") && at_prompt(s)
        })
        .await;
    assert!(
        screen.contains("```rust\nfn main() {\n    let greeting = \"hi\"; // say it\n}\n```"),
        "{screen}"
    );
    let styled = term.capture_styled(PANE);
    assert!(
        block(&styled).iter().all(|l| !l.contains("\x1b[")),
        "no colour with NO_COLOR: {styled:?}"
    );
}
