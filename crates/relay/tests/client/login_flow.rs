//! Claude Code's `/login` against Relay, as a person runs it in the terminal (claude_login.rs):
//! the gateway named by settings.json, the trust prompt, the code handed to `$BROWSER` and
//! approved in Chromium, the account to confirm, and the managed settings to approve, each screen
//! checked and recorded.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::gateway_world::{DEV, Gateway, PANE, Record, selected, until};
use crate::tmux::Tmux;

/// Moves the cursor of the choice titled `title` with `key` until it is on `option`, picks it,
/// and waits for the choice to go. Claude Code may draw a choice again a moment after showing it
/// (the managed settings' one, once their second fetch answers), back on its first option and
/// without the keys sent before: then it is chosen again.
async fn choose(term: &Tmux, title: &str, key: &str, option: &str) {
    for _ in 0..3 {
        for _ in 0..4 {
            if selected(&term.screen(PANE)) == option {
                break;
            }
            let before = selected(&term.screen(PANE));
            term.send_keys(PANE, &[key]);
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                while selected(&term.screen(PANE)) == before {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await;
        }
        until(term, &format!("the cursor on {option:?}"), 5, |s| {
            selected(s) == option
        })
        .await;
        term.send_keys(PANE, &["Enter"]);
        let gone = tokio::time::timeout(Duration::from_secs(5), async {
            while term.screen(PANE).contains(title) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        if gone.is_ok() {
            return;
        }
    }
    panic!(
        "{title:?} stayed after choosing {option:?}:\n{}",
        term.screen(PANE)
    );
}

/// `/login` in a signed-out interactive Claude Code, through Chromium's Approve, to the session
/// running on the new sign-in. `first`: this HOME has never trusted the gateway nor approved its
/// settings, so both prompts must appear; later sign-ins record whether they do.
pub async fn login(gw: &Gateway, term: &Tmux, rec: &mut Record, first: bool) {
    let screen = until(term, "the signed-out prompt", 60, |s| {
        s.contains("Not logged in · run /login")
    })
    .await;
    rec.screen("claude starts: signed out", &screen);
    term.send_keys(PANE, &["/login"]);
    until(term, "the typed /login", 10, |s| s.contains("❯ /login")).await;
    term.send_keys(PANE, &["Enter"]);
    let screen = until(term, "the gateway to connect to", 20, |s| {
        s.contains("Enter to connect")
    })
    .await;
    rec.screen("/login names the gateway from settings.json", &screen);
    assert!(screen.contains(&gw.server.base), "{screen}");
    term.send_keys(PANE, &["Enter"]);
    let screen = until(term, "the trust prompt or the code", 20, |s| {
        s.contains("Trust gateway 127.0.0.1?") || s.contains("Code:")
    })
    .await;
    if screen.contains("Trust gateway") {
        rec.screen("asks to trust the gateway (loopback too)", &screen);
        assert_eq!(selected(&screen), "No, cancel login", "{screen}");
        choose(term, "Trust gateway", "Up", "Yes, trust this gateway").await;
    } else {
        assert!(
            !first,
            "the first sign-in must ask to trust the gateway:\n{screen}"
        );
        rec.note("no trust prompt this time");
    }
    let screen = until(term, "the user code", 20, |s| s.contains("Code:")).await;
    rec.screen("the device flow: the code, verification_uri", &screen);
    let code = screen
        .lines()
        .find_map(|l| l.trim().strip_prefix("Code:"))
        .map(|c| c.trim().to_owned())
        .unwrap();
    assert!(screen.contains(&gw.url("/device")), "{screen}");
    // `$BROWSER` got verification_uri_complete.
    let deadline = Instant::now() + Duration::from_secs(10);
    let opened = loop {
        if let Some(url) = gw.opened().pop() {
            break url;
        }
        assert!(Instant::now() < deadline, "$BROWSER was never run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(opened, gw.url(&format!("/device?user_code={code}")));

    let shown = gw.approve_in_chromium(&opened, &rec.dir).await;
    let approved = Instant::now();
    rec.note(&format!("Chromium on /device showed {shown}"));
    assert_eq!(shown["code"], code.as_str());
    assert_eq!(
        shown["client"], "claude_code",
        "the device request's surface"
    );
    assert!(
        shown["agent"]
            .as_str()
            .unwrap()
            .contains("claude-code/2.1.332"),
        "{shown}"
    );
    assert_eq!(shown["account"], DEV);
    assert_eq!(shown["title"], "Approved");
    assert_eq!(shown["problems"], json!([]));

    let screen = until(term, "the account to confirm", 20, |s| {
        s.contains(&format!("Signed in to Cloud gateway as {DEV}"))
    })
    .await;
    rec.screen(
        &format!(
            "{:.1} s after Approve: confirm the account",
            approved.elapsed().as_secs_f64()
        ),
        &screen,
    );
    assert_eq!(selected(&screen), "No, cancel login", "{screen}");
    choose(term, "Signed in to Cloud gateway as", "Up", "Yes, continue").await;
    let screen = until(term, "connected", 20, |s| {
        s.contains("Connected to Cloud gateway")
    })
    .await;
    rec.screen("connected", &screen);
    assert_eq!(gw.stored()["email"], DEV);
    term.send_keys(PANE, &["Enter"]);
    let screen = until(term, "the settings to approve or the session", 30, |s| {
        s.contains("Managed settings require approval") || s.contains("· Cloud gateway")
    })
    .await;
    if screen.contains("Managed settings require approval") {
        rec.screen("asks to approve the managed settings' env entry", &screen);
        assert!(screen.contains("RELAY_PROOF_VAR"), "{screen}");
        assert_eq!(selected(&screen), "No, exit Claude Code", "{screen}");
        choose(
            term,
            "Managed settings require approval",
            "Down",
            "Yes, I trust these settings",
        )
        .await;
    } else {
        assert!(
            !first,
            "the first sign-in must ask about the env entry:\n{screen}"
        );
        rec.note("the managed settings were not asked about again");
    }
    let screen = until(term, "the session on the gateway", 30, |s| {
        s.contains("· Cloud gateway")
    })
    .await;
    rec.screen("the session runs on the gateway's sign-in", &screen);
}
