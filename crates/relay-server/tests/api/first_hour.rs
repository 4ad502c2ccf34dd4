//! Issue 42, the first hour: a provider's own words on every route (sanitised), the unit quota's
//! month (rolled over with the app's clock moved), sign-in lock-outs that do not lock everyone,
//! the memory API's papercuts and `/` for a browser. Runs on both stores.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent::{auth_app, open_app, user_says};
use crate::compat::sse_events;
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::{TestApp, auth_config, body, expect_error};

/// What OpenAI answers a wrong key with, plus an account id and a URL with a key in its query.
fn wrong_key() -> Reply {
    Reply::Status {
        status: 401,
        body: json!({"error": {
            "message": "Incorrect API key provided: sk-proj-AbCdEf1234567890abcdef. Organization org-a1B2c3D4e5F6g7H8; see https://platform.example.com/keys?key=AIzaSECRETSECRET1234",
            "type": "invalid_request_error",
            "code": "invalid_api_key"}}),
        retry_after: None,
    }
}

/// The provider's words are there, and nothing secret is.
fn says_why(message: &str) {
    assert!(
        message.contains("Incorrect API key provided")
            && message.contains("invalid_api_key")
            && message.contains("401"),
        "{message}"
    );
    for secret in ["sk-proj", "org-a1B2", "AIzaSECRET", "key=", "?"] {
        assert!(!message.contains(secret), "{secret} in {message}");
    }
    assert!(message.chars().count() <= 900, "{message}");
}

#[tokio::test]
async fn a_providers_refusal_reaches_the_user_on_every_route_without_secrets() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;

    // The native leg: the 502 before the first byte.
    fake.push("up-1", wrong_key());
    let b = expect_error(
        app.post("/v1/agent/stream", None, &user_says("hi")).await,
        502,
        "upstream_error",
    )
    .await;
    says_why(b["message"].as_str().unwrap());

    // Each door's own error shape.
    fake.push("up-1", wrong_key());
    let r = app
        .post(
            "/v1/chat/completions",
            None,
            &json!({"model": "m1", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
    says_why(body(r).await["error"]["message"].as_str().unwrap());

    fake.push("up-1", wrong_key());
    let r = app
        .post(
            "/v1/messages",
            None,
            &json!({"model": "m1", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
    let b = body(r).await;
    assert_eq!(b["type"], "error");
    says_why(b["error"]["message"].as_str().unwrap());

    fake.push("up-1", wrong_key());
    let r = app
        .post("/v1/responses", None, &json!({"model": "m1", "input": "x"}))
        .await;
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
    says_why(body(r).await["error"]["message"].as_str().unwrap());

    // After the headers: the NDJSON `error` line and a streamed door's error event.
    let mid_stream = || {
        Reply::SseThenSilence(vec![
            up::text_chunk("par"),
            up::data(json!({"error": {
                "message": "The server had an error processing your request (account 123456789012)",
                "type": "server_error", "code": 500}})),
        ])
    };
    fake.push("up-1", mid_stream());
    let (code, lines) = app.leg(None, &user_says("hi")).await;
    assert_eq!(code, StatusCode::OK);
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "error");
    let message = last["message"].as_str().unwrap();
    assert!(
        message.contains("The server had an error processing your request"),
        "{message}"
    );
    assert!(!message.contains("123456789012"), "{message}");

    fake.push("up-1", mid_stream());
    let text = app
        .post(
            "/v1/chat/completions",
            None,
            &json!({"model": "m1", "stream": true, "messages": [{"role": "user", "content": "x"}]}),
        )
        .await
        .text()
        .await
        .unwrap();
    let (_, data) = sse_events(&text).last().unwrap().clone();
    let error: Value = serde_json::from_str(&data).unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("The server had an error"),
        "{text}"
    );
}

fn month_app(
    fake: &FakeUpstream,
    period: relay_server::config::QuotaPeriod,
) -> impl FnOnce(&std::path::Path) -> relay_server::Config + '_ {
    move |dir| {
        let mut c = crate::agent::with_fake(auth_config(dir), fake);
        let auth = c.auth.as_mut().unwrap();
        auth.default_limit = 2;
        auth.quota_period = period;
        c.limits.agent_burst = 1_000;
        c
    }
}

#[tokio::test]
async fn the_quota_counts_the_month_and_a_new_month_starts_it_again() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(month_app(&fake, relay_server::config::QuotaPeriod::Month)).await;
    let token = app.user("ada@example.com").await;
    for _ in 0..2 {
        fake.push("up-1", up::text_reply(&["ok"]));
        assert_eq!(
            app.leg(Some(&token), &user_says("hi")).await.0,
            StatusCode::OK
        );
    }
    let me = body(app.me(Some(&token)).await).await;
    assert_eq!((&me["used"], &me["remaining"]), (&json!(2), &json!(0)));
    assert_eq!(me["quota_period"], "month");
    let resets = me["quota_resets_at"].as_str().unwrap().to_owned();
    assert!(resets.ends_with("-01T00:00:00Z"), "{resets}");
    assert_eq!(me["tokens_resets_at"], me["quota_resets_at"]);

    // The refusal names the limit, the period and the reset.
    let b = expect_error(
        app.post("/v1/agent/stream", Some(&token), &user_says("hi"))
            .await,
        403,
        "quota_exceeded",
    )
    .await;
    let message = b["message"].as_str().unwrap();
    assert!(
        message.contains("quota of 2 legs this month") && message.contains(&resets),
        "{message}"
    );

    // A month later (the app's clock moved, nothing else touched) the count starts again.
    app.state.clock().advance(32 * 86_400);
    let me = body(app.me(Some(&token)).await).await;
    assert_eq!((&me["used"], &me["remaining"]), (&json!(0), &json!(2)));
    assert!(me["quota_resets_at"].as_str().unwrap() > resets.as_str());
    fake.push("up-1", up::text_reply(&["ok"]));
    assert_eq!(
        app.leg(Some(&token), &user_says("hi")).await.0,
        StatusCode::OK
    );
    assert_eq!(body(app.me(Some(&token)).await).await["used"], 1);
}

#[tokio::test]
async fn a_never_period_keeps_the_lifetime_count() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(month_app(&fake, relay_server::config::QuotaPeriod::Never)).await;
    let token = app.user("ada@example.com").await;
    fake.push("up-1", up::text_reply(&["ok"]));
    assert_eq!(
        app.leg(Some(&token), &user_says("hi")).await.0,
        StatusCode::OK
    );
    app.state.clock().advance(40 * 86_400);
    let me = body(app.me(Some(&token)).await).await;
    assert_eq!(
        (&me["used"], &me["quota_period"], &me["quota_resets_at"]),
        (&json!(1), &json!("never"), &Value::Null)
    );
}

#[tokio::test]
async fn the_admin_list_shows_units_and_tokens_with_their_periods() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 7).await;
    let admin = app.user("root@example.com").await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        "root@example.com",
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    app.user("bob@example.com").await;
    let list = body(app.get("/v1/admin/users", Some(&admin)).await).await;
    let bob = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["email"] == "bob@example.com")
        .unwrap()
        .clone();
    assert_eq!(
        (&bob["limit"], &bob["used"], &bob["quota_period"]),
        (&json!(7), &json!(0), &json!("month"))
    );
    assert_eq!(
        (&bob["token_budget"], &bob["tokens_used"]),
        (&json!(-1), &json!(0))
    );
    assert!(bob["quota_resets_at"].as_str().unwrap().ends_with("Z"));
    assert!(bob["tokens_resets_at"].as_str().unwrap().ends_with("Z"));
}

async fn signin(app: &TestApp, email: &str, password: &str) -> reqwest::Response {
    app.signin(email, password).await
}

/// Retries a sign-in that the address's delay refuses, after the `Retry-After` it names.
async fn signin_after_delay(app: &TestApp, email: &str, password: &str) -> reqwest::Response {
    for _ in 0..5 {
        let r = signin(app, email, password).await;
        if r.status() != StatusCode::TOO_MANY_REQUESTS {
            return r;
        }
        let wait: u64 = r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        if wait > 2 {
            // A lock, not an address's short delay.
            return r;
        }
        tokio::time::sleep(Duration::from_secs(wait)).await;
    }
    panic!("still refused after the delays");
}

#[tokio::test]
async fn wrong_passwords_lock_the_email_and_only_slow_the_address() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        c.limits.signin_failures = 3;
        c
    })
    .await;
    let root = app.user("root@example.com").await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        "root@example.com",
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    app.user("ada@example.com").await;
    app.user("bob@example.com").await;
    for _ in 0..3 {
        let r = signin_after_delay(&app, "ada@example.com", "wrong password!").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    // Ada's email is locked, with the seconds left in the message and the header: at once,
    // while the address is also slowed, the lock's wait and not the address's second.
    let r = signin(&app, "ada@example.com", "correct horse battery").await;
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(wait > 60, "a lock, not a delay: {wait}");
    let b = expect_error(r, 429, "rate_limited").await;
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{wait} seconds")),
        "{b}"
    );
    // Bob, from the same (throttled) address, still signs in after its delay.
    let r = signin_after_delay(&app, "bob@example.com", "correct horse battery").await;
    assert_eq!(r.status(), StatusCode::OK);

    // An admin lifts Ada's lock without a restart; a non-admin may not.
    let lift = |token: String| {
        app.client
            .delete(app.url("/v1/admin/users/ada@example.com/lock"))
            .bearer_auth(token)
            .send()
    };
    let bob = body(signin_after_delay(&app, "bob@example.com", "correct horse battery").await)
        .await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    expect_error(lift(bob).await.unwrap(), 403, "forbidden").await;
    let r = lift(root.clone()).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = signin_after_delay(&app, "ada@example.com", "correct horse battery").await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = app
        .client
        .delete(app.url("/v1/admin/users/nobody@example.com/lock"))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap();
    expect_error(r, 404, "not_found").await;
}

#[tokio::test]
async fn memory_patch_takes_note_as_content_and_refuses_an_empty_change() {
    let app = TestApp::open().await;
    let r = app
        .post(
            "/v1/memory/remember",
            None,
            &json!({"note": "first text", "project_id": "p1"}),
        )
        .await;
    let b = body(r).await;
    assert_eq!(b["ok"], true);
    let id = b["id"].as_str().unwrap().to_owned();
    let listed = body(app.get("/v1/memory/list?project_id=p1", None).await).await;
    assert_eq!(
        listed["items"][0]["id"],
        id.as_str(),
        "remember answers the note's id"
    );

    let path = format!("/v1/memory/{}", id.replace('#', "%23"));
    let patch = |v: Value| app.client.patch(app.url(&path)).json(&v).send();
    let b = body(patch(json!({"note": "edited"})).await.unwrap()).await;
    assert_eq!(b["item"]["note"], "edited");
    let b = body(patch(json!({"content": "by content"})).await.unwrap()).await;
    assert_eq!(b["item"]["note"], "by content");
    let b = expect_error(
        patch(json!({"text": "misspelt"})).await.unwrap(),
        400,
        "invalid_request",
    )
    .await;
    let message = b["message"].as_str().unwrap();
    assert!(
        message.contains("content") && message.contains("note") && message.contains("pinned"),
        "{message}"
    );
    let b = body(patch(json!({"pinned": true})).await.unwrap()).await;
    assert_eq!(b["item"]["note"], "by content", "nothing else changed");
}

#[tokio::test]
async fn a_browser_at_the_root_goes_to_the_console() {
    let app = TestApp::open().await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = client
        .get(app.url("/"))
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    assert_eq!(r.headers()["location"], "/console");
    let b = expect_error(app.get("/", None).await, 404, "not_found").await;
    assert!(b["message"].as_str().unwrap().contains("/console"));
}
