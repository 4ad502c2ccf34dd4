//! Issue 40's proof with the real Claude Code 2.1.332 (from `tests/agents`): in tmux, with a
//! private HOME whose `~/.claude/settings.json` names Relay (`forceLoginMethod: "gateway"`,
//! `forceLoginGatewayUrl` on `http://127.0.0.1`) and no `ANTHROPIC_*` variable, `/login` runs the
//! device flow against a real `relay serve`: Claude Code asks to trust the gateway and to confirm
//! the account (both start on "No"), hands `/device?user_code=…` to `$BROWSER`, and Chromium signs
//! in there and clicks Approve. Then `claude -p` runs a Bash tool round trip on the stored sign-in
//! alone, and the admin's managed settings reach the tool (an `env` entry it prints); with a unit
//! quota the interactive session shows Claude Code's usage notice past 75 % and again past 95 %,
//! then Relay's sentence once the quota is reached; `/logout` revokes both tokens; a second sign-in
//! refreshes when under 5 minutes are left; and after an admin ends the account's sessions the
//! next run stops at once asking to sign in again.
//!
//! Gated like the other real-agent tests: with `RELAY_AGENTS_BIN` set or `CI=true` a missing
//! agent, playwright-core (tests/browser) or Chromium fails the test; with neither it says
//! SKIPPED. What the agent showed at each step, with timings, is written to
//! `$CARGO_TARGET_TMPDIR/claude-login/record.md` (Chromium's screenshots beside it).

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::fake_anthropic::{RUN, proof_result};
use crate::gateway_world::{DEV, Gateway, PANE, Record, onboarded, tools, until};
use crate::login_flow::login;
use crate::tmux::Tmux;

/// The managed settings' value, which only reaches the tool if Claude Code applied them.
const PROOF: &str = "managed-by-relay-7f3a";

/// Relay's answer to a refresh with `refresh_token`: status and body.
async fn refresh(gw: &Gateway, refresh_token: &str) -> (u16, Value) {
    let r = gw
        .http
        .post(gw.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        // Relay's refresh tokens are `rrt_` and URL-safe characters: nothing to escape.
        .body(format!(
            "grant_type=refresh_token&refresh_token={refresh_token}"
        ))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn me(gw: &Gateway, token: &str) -> (u16, Value) {
    let r = gw
        .http
        .get(gw.url("/v1/me"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// The percent in Claude Code's usage notice ("You've used NN% of your usage credits"), if shown.
fn notice(screen: &str) -> Option<u64> {
    screen
        .split("You've used ")
        .nth(1)?
        .split('%')
        .next()?
        .parse()
        .ok()
}

/// Types `prompt`, sends it, and waits for `check` (what the answer should show).
async fn ask(term: &Tmux, prompt: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
    term.send_keys(PANE, &[prompt]);
    until(term, "the typed prompt", 10, |s| s.contains(prompt)).await;
    term.send_keys(PANE, &["Enter"]);
    until(term, what, 30, check).await
}

/// Past 75 % of a cap the interactive session shows Claude Code's own usage notice, driven by the
/// `anthropic-ratelimit-unified-*` headers of Relay's answers: none while the account has no cap,
/// then a unit quota that the next prompt takes past 75 % (but not to 100 %).
async fn usage_notice(gw: &Gateway, term: &Tmux, rec: &mut Record, access: &str) {
    assert!(
        !term.screen(PANE).contains("You've used"),
        "no notice without a cap"
    );
    // The next call takes the account from `used` to `used + 1` of `used + 2` units: 80 % or more
    // with 3 calls behind it (the sign-in's quota probes and the `-p` run's two), and not yet 100 %.
    let used = me(gw, access).await.1["used"].as_i64().unwrap();
    assert!(used >= 3, "the session's calls so far: {used}");
    let limit = used + 2;
    let status = gw
        .admin_send(
            Method::PATCH,
            &format!("/v1/admin/users/{DEV}"),
            Some(json!({"limit": limit})),
        )
        .await;
    assert_eq!(status, 200);
    // Claude Code shows the notice for some seconds once the answers turn to `allowed_warning`.
    let screen = ask(term, "how much have I used?", "the usage notice", |s| {
        notice(s).is_some()
    })
    .await;
    let shown = notice(&screen).unwrap_or_default();
    let now = me(gw, access).await.1["used"].as_i64().unwrap();
    rec.screen(
        &format!("the usage notice at {now} of {limit} units: {shown} %"),
        &screen,
    );
    assert!((75..95).contains(&shown), "{screen}");
    assert!(
        screen.contains("of your usage credits · resets"),
        "{screen}"
    );
    // `/usage` reads GET /api/oauth/usage: the same percent.
    let screen = ask(term, "/usage", "the usage panel", |s| s.contains("% used")).await;
    rec.screen("/usage", &screen);
    assert!(screen.contains(&format!("{shown}% used")), "{screen}");
    term.send_keys(PANE, &["Escape"]);
    until(term, "the panel to close", 10, |s| !s.contains("% used")).await;
    // Once that notice is gone (a new one is not drawn over it), the next call uses the last unit:
    // its answer says 0.99, past 0.95, and the notice comes again. The call after is refused with
    // Relay's sentence.
    until(term, "the notice to go", 30, |s| notice(s).is_none()).await;
    let screen = ask(term, "and now?", "the notice past 95 %", |s| {
        notice(s).is_some_and(|p| p >= 95)
    })
    .await;
    let shown = notice(&screen).unwrap_or_default();
    rec.screen(&format!("the last unit: {shown} %"), &screen);
    assert!(shown < 100, "{screen}");
    let asked = Instant::now();
    let screen = ask(term, "one more?", "the quota's refusal", |s| {
        s.contains("is used up")
    })
    .await;
    rec.screen(
        &format!(
            "the quota reached, {:.1} s after Enter",
            asked.elapsed().as_secs_f64()
        ),
        &screen,
    );
    assert!(screen.contains("ask an operator to raise it"), "{screen}");
    // Unlimited again for the rest of the run.
    let status = gw
        .admin_send(
            Method::PATCH,
            &format!("/v1/admin/users/{DEV}"),
            Some(json!({"limit": -1})),
        )
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_signs_in_with_login_and_stops_when_signed_out() {
    let Some(claude) = tools() else {
        return;
    };
    let gw = Gateway::start(claude).await;
    let mut rec = Record::new();
    let settings = json!({"env": {"RELAY_PROOF_VAR": PROOF}});
    let status = gw
        .admin_send(Method::PUT, "/v1/admin/agent-settings", Some(settings))
        .await;
    assert_eq!(status, 200);

    // `/login`, approved in Chromium.
    let term = gw.interactive("first");
    login(&gw, &term, &mut rec, true).await;
    let stored = gw.stored();
    assert_eq!(stored["url"], gw.server.base.as_str(), "{stored}");
    let (access, refresh_token) = (
        stored["jwt"].as_str().unwrap().to_owned(),
        stored["idpRefreshToken"].as_str().unwrap().to_owned(),
    );
    assert_eq!(me(&gw, &access).await.1["email"], DEV);

    // `claude -p` on the stored sign-in: a Bash round trip that prints the managed variable.
    let (ok, out, took) = gw.print(&format!("{RUN}: print the proof variable")).await;
    rec.note(&format!(
        "claude -p ({:.1} s, ok: {ok}): {}",
        took.as_secs_f64(),
        out.trim()
    ));
    assert!(ok, "{out}");
    let expected = format!("proof={PROOF}");
    assert!(out.contains(&expected), "{out}");
    let results: Vec<String> = gw.fake.requests().iter().filter_map(proof_result).collect();
    assert!(
        results.iter().any(|r| r.contains(&expected)),
        "the provider saw the tool's result: {results:?}"
    );
    assert_eq!(gw.stored()["jwt"], access.as_str(), "no refresh was due");

    usage_notice(&gw, &term, &mut rec, &access).await;

    // `/logout` revokes both tokens (RFC 7009) and ends the session.
    term.send_keys(PANE, &["/logout"]);
    until(&term, "the typed /logout", 10, |s| s.contains("❯ /logout")).await;
    term.send_keys(PANE, &["Enter"]);
    let asked = Instant::now();
    let screen = until(&term, "the sign-out", 20, |s| {
        s.contains("Successfully logged out")
    })
    .await;
    rec.screen(
        &format!(
            "/logout, {:.1} s after Enter (the pane's program exited: {:?})",
            asked.elapsed().as_secs_f64(),
            term.exit_status(PANE)
        ),
        &screen,
    );
    // Claude Code revokes the access token, then the refresh token, and forgets them; the access
    // token's end is watched (asking with the refresh token would spend it).
    let deadline = Instant::now() + Duration::from_secs(10);
    while me(&gw, &access).await.0 != 401 || !gw.stored().is_null() {
        assert!(Instant::now() < deadline, "the sign-in outlived /logout");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = refresh(&gw, &refresh_token).await;
    assert_eq!((status, &body["error"]), (401, &json!("invalid_grant")));
    // Whether Claude Code has exited by now is recorded, not required: once it had not after a
    // minute, with nothing of it left pending at Relay.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while term.exit_status(PANE).is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    rec.note(&format!(
        "/logout: {:.1} s after Enter the program's exit status is {:?}",
        asked.elapsed().as_secs_f64(),
        term.exit_status(PANE)
    ));
    drop(term);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(gw.home.join(".claude.json")).unwrap())
            .unwrap();
    rec.note(&format!(
        "after /logout ~/.claude.json has hasCompletedOnboarding = {} (the next start shows the \
         first-run screens unless it is set again)",
        state["hasCompletedOnboarding"]
    ));
    onboarded(&gw.home, &gw.work);

    // Signed in again; then an admin ends every session of the account.
    let term = gw.interactive("second");
    login(&gw, &term, &mut rec, false).await;
    let (ok, out, _) = gw.print(&format!("{RUN}: once more")).await;
    assert!(ok, "{out}");
    // With under 5 minutes left on the access token (its stored expiry moved, as time would), the
    // next run refreshes first: both tokens rotate.
    let before = gw.stored();
    gw.expire_in(Duration::from_secs(120));
    let (ok, out, _) = gw.print("say ok").await;
    assert!(ok, "{out}");
    let after = gw.stored();
    rec.note(&format!(
        "claude -p with 120 s left on the access token: refreshed: {}",
        after["jwt"] != before["jwt"]
    ));
    assert_ne!(
        after["jwt"], before["jwt"],
        "the access token was refreshed"
    );
    assert_ne!(after["idpRefreshToken"], before["idpRefreshToken"]);
    assert_eq!(
        me(&gw, after["jwt"].as_str().unwrap()).await.1["email"],
        DEV
    );
    let status = gw
        .admin_send(
            Method::DELETE,
            &format!("/v1/admin/users/{DEV}/sessions"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let seen = gw.fake.requests().len();
    let (ok, out, took) = gw.print(&format!("{RUN}: after the revocation")).await;
    rec.note(&format!(
        "claude -p after DELETE /v1/admin/users/{DEV}/sessions ({:.2} s, ok: {ok}): {}",
        took.as_secs_f64(),
        out.trim()
    ));
    assert!(!ok, "{out}");
    assert!(
        out.contains("sign in again with /login"),
        "Claude Code asks to sign in again: {out}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(
        gw.fake.requests().len(),
        seen,
        "nothing reached the provider"
    );

    // The interactive session signed in before the revocation is stopped too.
    term.send_keys(PANE, &["are you there?"]);
    until(&term, "the typed prompt", 10, |s| {
        s.contains("are you there?")
    })
    .await;
    term.send_keys(PANE, &["Enter"]);
    let asked = Instant::now();
    let screen = until(&term, "a request to sign in again", 20, |s| {
        s.contains("Please run /login")
    })
    .await;
    rec.screen(
        &format!(
            "the interactive session after the revocation, {:.1} s after Enter",
            asked.elapsed().as_secs_f64()
        ),
        &screen,
    );
    assert_eq!(
        gw.fake.requests().len(),
        seen,
        "nothing reached the provider"
    );
    rec.note(&format!(
        "what Relay answered, in order:\n```\n{}\n```",
        requests(&gw.server.log())
    ));
}

/// `METHOD path status` of each request in Relay's log.
fn requests(log: &str) -> String {
    let field = |line: &str, name: &str| {
        line.split(name)
            .nth(1)
            .and_then(|rest| rest.split([' ', '}']).next())
            .unwrap_or_default()
            .to_owned()
    };
    log.lines()
        .filter(|l| l.contains("http.response.status_code="))
        .map(|l| {
            format!(
                "{} {} {}",
                field(l, "method="),
                field(l, "path="),
                field(l, "http.response.status_code=")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
