//! Agents sign in (issue 40): the OAuth device flow as Claude Code's `/login` runs it, refresh
//! with rotation and reuse revocation, revocation, the `/device` page and its calls, the 401 that
//! stops Claude Code, and an admin ending every session. Runs on both stores.

use relay_server::config::Config;
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, auth_config, body, expect_error};

const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// A form post, as Claude Code sends it (with its User-Agent).
async fn form(app: &TestApp, path: &str, fields: &[(&str, &str)]) -> Response {
    app.client
        .post(app.url(path))
        .header("user-agent", "claude-code/2.1.332")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string(fields).unwrap())
        .send()
        .await
        .unwrap()
}

async fn start(app: &TestApp) -> Value {
    let r = form(
        app,
        "/oauth/device_authorization",
        &[("surface", "claude_code"), ("something_new", "ignored")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    body(r).await
}

async fn poll(app: &TestApp, device_code: &str) -> Response {
    form(
        app,
        "/oauth/token",
        &[("grant_type", DEVICE_GRANT), ("device_code", device_code)],
    )
    .await
}

async fn oauth_error(r: Response, status: u16, error: &str) {
    assert_eq!(r.status().as_u16(), status, "status");
    let b = body(r).await;
    assert_eq!(b["error"], error, "{b}");
    assert!(
        b["error_description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
}

async fn decide(app: &TestApp, token: &str, user_code: &str, approve: bool) -> Response {
    app.post(
        &format!("/v1/device/{user_code}"),
        Some(token),
        &json!({"approve": approve}),
    )
    .await
}

/// Runs the whole device flow for `email` (signed up here); the token answer.
async fn signed_in_agent(app: &TestApp, email: &str) -> Value {
    let browser = app.user(email).await;
    let started = start(app).await;
    let code = started["user_code"].as_str().unwrap();
    assert_eq!(decide(app, &browser, code, true).await.status(), 200);
    let r = poll(app, started["device_code"].as_str().unwrap()).await;
    assert_eq!(r.status(), StatusCode::OK);
    body(r).await
}

async fn messages(app: &TestApp, token: &str) -> Response {
    app.post(
        "/v1/messages?beta=true",
        Some(token),
        &json!({"model": "auto", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await
}

#[tokio::test]
async fn metadata_names_the_endpoints_on_relays_own_origin() {
    let app = TestApp::with_auth().await;
    let r = app
        .get("/.well-known/oauth-authorization-server", None)
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let m = body(r).await;
    let base = format!("http://{}", app.addr);
    assert_eq!(m["issuer"], base.as_str());
    assert_eq!(
        m["device_authorization_endpoint"],
        format!("{base}/oauth/device_authorization")
    );
    assert_eq!(m["token_endpoint"], format!("{base}/oauth/token"));
    assert_eq!(m["revocation_endpoint"], format!("{base}/oauth/revoke"));
    assert_eq!(
        m["grant_types_supported"],
        json!([DEVICE_GRANT, "refresh_token"])
    );
}

#[tokio::test]
async fn public_url_is_the_base_of_every_link() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        c.server.public_url = Some("https://relay.example.com/".into());
        c
    })
    .await;
    let m = body(
        app.get("/.well-known/oauth-authorization-server", None)
            .await,
    )
    .await;
    assert_eq!(m["token_endpoint"], "https://relay.example.com/oauth/token");
    let d = start(&app).await;
    assert_eq!(d["verification_uri"], "https://relay.example.com/device");
    assert_eq!(
        d["verification_uri_complete"],
        format!(
            "https://relay.example.com/device?user_code={}",
            d["user_code"].as_str().unwrap()
        )
    );
}

#[test]
fn a_public_bind_with_accounts_needs_public_url() {
    let mut c = Config {
        bind: "0.0.0.0:7711".parse().unwrap(),
        auth: Some(Default::default()),
        ..Default::default()
    };
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("public_url"), "{err}");
    c.server.public_url = Some("https://relay.example.com".into());
    assert!(c.validate().is_ok());
    c.server.public_url = Some("relay.example.com".into());
    assert!(c.validate().is_err(), "not an absolute URL");
}

#[tokio::test]
async fn open_mode_answers_404_saying_sign_in_needs_auth() {
    let app = TestApp::open().await;
    for r in [
        app.get("/.well-known/oauth-authorization-server", None)
            .await,
        app.get("/device", None).await,
        form(
            &app,
            "/oauth/device_authorization",
            &[("surface", "claude_code")],
        )
        .await,
        form(&app, "/oauth/token", &[("grant_type", DEVICE_GRANT)]).await,
        form(&app, "/oauth/revoke", &[("token", "x")]).await,
    ] {
        let b = expect_error(r, 404, "not_found").await;
        assert!(b["message"].as_str().unwrap().contains("[auth]"), "{b}");
    }
}

#[tokio::test]
async fn the_device_flow_gives_one_token_pair_for_one_approval() {
    let app = TestApp::with_auth().await;
    let d = start(&app).await;
    let device_code = d["device_code"].as_str().unwrap();
    let user_code = d["user_code"].as_str().unwrap();
    // 256 bits in base64url are 43 characters, after the 4-character prefix.
    assert!(device_code.len() >= 47, "{device_code}");
    assert_eq!(user_code.len(), 9);
    assert!(
        user_code.chars().enumerate().all(|(i, c)| if i == 4 {
            c == '-'
        } else {
            "BCDFGHJKLMNPQRSTVWXZ".contains(c)
        }),
        "{user_code}"
    );
    assert_eq!(d["expires_in"], 600);
    assert_eq!(d["interval"], 5);
    assert_eq!(d["verification_uri"], app.url("/device"));
    assert_eq!(
        d["verification_uri_complete"],
        app.url(&format!("/device?user_code={user_code}"))
    );

    oauth_error(poll(&app, device_code).await, 400, "authorization_pending").await;
    oauth_error(poll(&app, device_code).await, 400, "slow_down").await;

    let browser = app.user("ada@example.com").await;
    // The page shows what asked before anyone decides; the code's case and dash do not matter.
    let r = app
        .get(
            &format!("/v1/device/{}", user_code.replace('-', "").to_lowercase()),
            Some(&browser),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let shown = body(r).await;
    assert_eq!(shown["user_code"], user_code);
    assert_eq!(shown["surface"], "claude_code");
    assert_eq!(shown["user_agent"], "claude-code/2.1.332");
    assert!(shown["expires_in"].as_u64().unwrap() > 590);
    // Showing it approved nothing.
    oauth_error(poll(&app, device_code).await, 400, "slow_down").await;

    assert_eq!(decide(&app, &browser, user_code, true).await.status(), 200);
    let r = poll(&app, device_code).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["cache-control"], "no-store");
    let t = body(r).await;
    assert_eq!(t["token_type"], "Bearer");
    assert_eq!(t["expires_in"], 3600);
    assert_eq!(t["email"], "ada@example.com");
    assert_ne!(t["refresh_token"], t["access_token"]);
    let access = t["access_token"].as_str().unwrap();
    let me = body(app.me(Some(access)).await).await;
    assert_eq!(me["email"], "ada@example.com");

    // Single use: the code is spent, and cannot be approved again.
    oauth_error(poll(&app, device_code).await, 400, "invalid_grant").await;
    expect_error(
        decide(&app, &browser, user_code, true).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn a_denied_code_gives_access_denied() {
    let app = TestApp::with_auth().await;
    let d = start(&app).await;
    let browser = app.user("ada@example.com").await;
    assert_eq!(
        decide(&app, &browser, d["user_code"].as_str().unwrap(), false)
            .await
            .status(),
        200
    );
    oauth_error(
        poll(&app, d["device_code"].as_str().unwrap()).await,
        400,
        "access_denied",
    )
    .await;
}

#[tokio::test]
async fn an_expired_code_gives_expired_token_and_cannot_be_approved() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        c.auth.as_mut().unwrap().device_code_ttl_secs = 0;
        c
    })
    .await;
    let d = start(&app).await;
    let browser = app.user("ada@example.com").await;
    let code = d["user_code"].as_str().unwrap();
    expect_error(
        app.get(&format!("/v1/device/{code}"), Some(&browser)).await,
        404,
        "not_found",
    )
    .await;
    expect_error(decide(&app, &browser, code, true).await, 404, "not_found").await;
    oauth_error(
        poll(&app, d["device_code"].as_str().unwrap()).await,
        400,
        "expired_token",
    )
    .await;
}

#[tokio::test]
async fn token_endpoint_errors_in_oauths_shape() {
    let app = TestApp::with_auth().await;
    oauth_error(poll(&app, "rdc_unknown").await, 400, "invalid_grant").await;
    oauth_error(
        form(&app, "/oauth/token", &[("grant_type", "password")]).await,
        400,
        "unsupported_grant_type",
    )
    .await;
    oauth_error(
        form(&app, "/oauth/token", &[]).await,
        400,
        "invalid_request",
    )
    .await;
    oauth_error(
        form(&app, "/oauth/token", &[("grant_type", DEVICE_GRANT)]).await,
        400,
        "invalid_request",
    )
    .await;
}

#[tokio::test]
async fn refresh_rotates_and_a_reused_refresh_token_revokes_the_sign_in() {
    let app = TestApp::with_auth().await;
    let first = signed_in_agent(&app, "ada@example.com").await;
    let old_refresh = first["refresh_token"].as_str().unwrap();
    let r = form(
        &app,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", old_refresh),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let second = body(r).await;
    assert_ne!(second["refresh_token"], first["refresh_token"]);
    assert_ne!(second["access_token"], first["access_token"]);
    assert_eq!(second["email"], "ada@example.com");
    let new_access = second["access_token"].as_str().unwrap();
    assert_eq!(app.me(Some(new_access)).await.status(), 200);

    // The old refresh token again: someone else holds a copy. The whole sign-in goes.
    let r = form(
        &app,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", old_refresh),
        ],
    )
    .await;
    oauth_error(r, 401, "invalid_grant").await;
    expect_error(app.me(Some(new_access)).await, 401, "unauthorized").await;
    expect_error(
        app.me(first["access_token"].as_str()).await,
        401,
        "unauthorized",
    )
    .await;
    let r = form(
        &app,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", second["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    oauth_error(r, 401, "invalid_grant").await;
    oauth_error(
        form(
            &app,
            "/oauth/token",
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", "rrt_nope"),
            ],
        )
        .await,
        401,
        "invalid_grant",
    )
    .await;
}

#[tokio::test]
async fn an_expired_refresh_token_is_invalid_grant() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        c.auth.as_mut().unwrap().refresh_token_ttl_days = 0;
        c
    })
    .await;
    let t = signed_in_agent(&app, "ada@example.com").await;
    let r = form(
        &app,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", t["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    oauth_error(r, 401, "invalid_grant").await;
}

#[tokio::test]
async fn revoking_stops_the_token_and_claude_code_at_once() {
    let app = TestApp::with_auth().await;
    let t = signed_in_agent(&app, "ada@example.com").await;
    let access = t["access_token"].as_str().unwrap();
    let r = form(&app, "/oauth/revoke", &[("token", access)]).await;
    assert_eq!(r.status(), StatusCode::OK);
    expect_error(app.me(Some(access)).await, 401, "unauthorized").await;
    let r = messages(&app, access).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["x-should-retry"], "false");
    let b = body(r).await;
    assert_eq!(b["type"], "error");
    assert_eq!(b["error"]["type"], "authentication_error");
    assert!(
        b["error"]["message"].as_str().unwrap().contains("/login"),
        "{b}"
    );

    // A refresh token takes its whole sign-in with it; unknown tokens are 200 too (RFC 7009).
    let t = signed_in_agent(&app, "bob@example.com").await;
    let r = form(
        &app,
        "/oauth/revoke",
        &[
            ("token", t["refresh_token"].as_str().unwrap()),
            ("token_type_hint", "refresh_token"),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    expect_error(
        app.me(t["access_token"].as_str()).await,
        401,
        "unauthorized",
    )
    .await;
    assert_eq!(
        form(&app, "/oauth/revoke", &[("token", "nothing")])
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn an_expired_access_token_gets_the_same_401() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        c.auth.as_mut().unwrap().access_token_ttl_secs = 0;
        c
    })
    .await;
    let t = signed_in_agent(&app, "ada@example.com").await;
    assert_eq!(t["expires_in"], 0);
    let r = messages(&app, t["access_token"].as_str().unwrap()).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["x-should-retry"], "false");
    // It refreshes into a working one.
    let r = form(
        &app,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", t["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn an_admin_ends_every_session_of_an_account() {
    let app = TestApp::with_auth().await;
    let root = app.user("root@example.com").await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        "root@example.com",
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    let agent = signed_in_agent(&app, "ada@example.com").await;
    let browser = body(app.signin("ada@example.com", "correct horse battery").await).await;
    let browser = browser["token"].as_str().unwrap();

    let r = app
        .client
        .delete(app.url("/v1/admin/users/ada@example.com/sessions"))
        .bearer_auth(browser)
        .send()
        .await
        .unwrap();
    expect_error(r, 403, "forbidden").await;

    let r = app
        .client
        .delete(app.url("/v1/admin/users/ada@example.com/sessions"))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let b = body(r).await;
    assert_eq!(b["ok"], true);
    // The signup's session, the signin's, the agent's access token and its refresh token.
    assert_eq!(b["revoked"], 4, "{b}");
    expect_error(app.me(Some(browser)).await, 401, "unauthorized").await;
    assert_eq!(
        messages(&app, agent["access_token"].as_str().unwrap())
            .await
            .status(),
        401
    );
    let r = form(
        &app,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", agent["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    oauth_error(r, 401, "invalid_grant").await;
    assert_eq!(
        app.me(Some(&root)).await.status(),
        200,
        "other accounts keep theirs"
    );

    let r = app
        .client
        .delete(app.url("/v1/admin/users/nobody@example.com/sessions"))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap();
    expect_error(r, 404, "not_found").await;
}

#[tokio::test]
async fn a_deleted_accounts_agent_tokens_stop_working() {
    let app = TestApp::with_auth().await;
    let t = signed_in_agent(&app, "ada@example.com").await;
    relay_server::operator::delete_user(
        app.state.auth().unwrap().as_ref(),
        app.state.memory().as_ref(),
        app.state.ledger().store().as_ref(),
        "ada@example.com",
    )
    .await
    .unwrap();
    assert_eq!(
        messages(&app, t["access_token"].as_str().unwrap())
            .await
            .status(),
        401
    );
    let r = form(
        &app,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", t["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    oauth_error(r, 401, "invalid_grant").await;
}

#[tokio::test]
async fn failed_codes_are_rate_limited_per_address_without_an_oracle() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        c.limits.signin_failures = 3;
        c
    })
    .await;
    let d = start(&app).await;
    let browser = app.user("ada@example.com").await;
    for _ in 0..3 {
        expect_error(
            app.get("/v1/device/BBBB-BBBB", Some(&browser)).await,
            404,
            "not_found",
        )
        .await;
    }
    let r = app.get("/v1/device/BBBB-BBBB", Some(&browser)).await;
    assert!(r.headers().contains_key("retry-after"));
    expect_error(r, 429, "rate_limited").await;
    // Locked out, a right code is refused the same way: guessing learns nothing.
    let code = d["user_code"].as_str().unwrap();
    expect_error(
        app.get(&format!("/v1/device/{code}"), Some(&browser)).await,
        429,
        "rate_limited",
    )
    .await;
    expect_error(
        decide(&app, &browser, code, true).await,
        429,
        "rate_limited",
    )
    .await;
}

#[tokio::test]
async fn starting_sign_ins_is_rate_limited_per_address() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        c.limits.device_per_minute = 1;
        c.limits.device_burst = 2;
        c
    })
    .await;
    start(&app).await;
    start(&app).await;
    let r = form(
        &app,
        "/oauth/device_authorization",
        &[("surface", "claude_code")],
    )
    .await;
    expect_error(r, 429, "rate_limited").await;
}

#[tokio::test]
async fn the_device_page_is_the_consoles_kind() {
    let app = TestApp::with_auth().await;
    let r = app.get("/device?user_code=WDJB-MJHT", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    let page = r.text().await.unwrap();
    for needle in [
        ">Email<",
        ">Password<",
        ">Sign in<",
        ">Approve<",
        ">Deny<",
        "/console/device.js",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
    let r = app.get("/console/device.js", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("/v1/device/"));
}

#[tokio::test]
async fn the_device_calls_need_a_signed_in_account_and_json() {
    let app = TestApp::with_auth().await;
    let d = start(&app).await;
    let code = d["user_code"].as_str().unwrap();
    expect_error(
        app.get(&format!("/v1/device/{code}"), None).await,
        401,
        "unauthorized",
    )
    .await;
    expect_error(
        decide(&app, "rly_forged", code, true).await,
        401,
        "unauthorized",
    )
    .await;
    // A cross-site form post cannot decide: only JSON bodies are taken off the OAuth paths.
    let browser = app.user("ada@example.com").await;
    let r = app
        .client
        .post(app.url(&format!("/v1/device/{code}")))
        .bearer_auth(&browser)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("approve=true")
        .send()
        .await
        .unwrap();
    expect_error(r, 415, "unsupported_media_type").await;
    oauth_error(
        poll(&app, d["device_code"].as_str().unwrap()).await,
        400,
        "authorization_pending",
    )
    .await;
}
