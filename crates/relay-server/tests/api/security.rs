//! Security properties across routes: isolation in agent legs, signin timing, and closed defaults.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::agent::with_fake;
use crate::fake_upstream::FakeUpstream;
use crate::helpers::{TestApp, auth_config, body, expect_error};

#[tokio::test]
async fn a_leg_never_injects_another_users_notes_even_with_their_project_id() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| with_fake(auth_config(dir), &fake)).await;
    let a = app.user("a@example.com").await;
    let b = app.user("b@example.com").await;
    app.remember(
        Some(&a),
        "shared-name",
        "A's private deployment password rotation plan",
    )
    .await;
    let leg = json!({"messages": [{"role": "user", "content": "deployment plan?"}], "project_id": "shared-name", "user_id": "a"});
    let (status, lines) = app.leg(Some(&b), &leg).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lines[0]["notes"], 0);
    let sent = fake.requests()[0].to_string();
    assert!(!sent.contains("rotation plan"), "{sent}");
    let (_, lines) = app.leg(Some(&a), &leg).await;
    assert_eq!(lines[0]["notes"], 1, "A gets A's own note");
}

#[tokio::test]
async fn every_authenticated_route_refuses_a_missing_or_revoked_token() {
    let app = TestApp::with_auth().await;
    let token = app.user("gone@example.com").await;
    app.post("/v1/auth/signout", Some(&token), &json!({})).await;
    let routes: [(&str, &str, serde_json::Value); 12] = [
        ("GET", "/v1/me", json!(null)),
        (
            "POST",
            "/v1/agent/stream",
            json!({"messages": [{"role": "user", "content": "x"}]}),
        ),
        ("GET", "/v1/tools", json!(null)),
        (
            "POST",
            "/v1/memory/remember",
            json!({"note": "x", "project_id": "p"}),
        ),
        ("GET", "/v1/memory/recall?project_id=p", json!(null)),
        ("POST", "/v1/memory/recall", json!({"project_id": "p"})),
        ("GET", "/v1/memory/list", json!(null)),
        ("POST", "/v1/memory/delete", json!({"all": true})),
        ("DELETE", "/v1/memory/all", json!(null)),
        ("DELETE", "/v1/memory/mem%23u%23p%231", json!(null)),
        ("POST", "/v1/suggest", json!({"partial": "git s"})),
        ("POST", "/v1/search", json!({"query": "x"})),
    ];
    for (method, path, b) in &routes {
        for t in [None, Some(token.as_str())] {
            let mut req = app.client.request(method.parse().unwrap(), app.url(path));
            if !b.is_null() {
                req = req.json(b);
            }
            if let Some(t) = t {
                req = req.bearer_auth(t);
            }
            let r = req.send().await.unwrap();
            expect_error(r, 401, "unauthorized").await;
        }
    }
    let r = app
        .client
        .patch(app.url("/v1/memory/mem%23u%23p%231"))
        .json(&json!({"content": "x"}))
        .send()
        .await
        .unwrap();
    expect_error(r, 401, "unauthorized").await;
}

#[tokio::test]
async fn signin_takes_as_long_for_an_unknown_email_as_for_a_wrong_password() {
    // Production Argon2 costs (OWASP: 19 MiB, 2 passes), and a failure budget the test cannot reach.
    let app = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        let a = c.auth.as_mut().unwrap();
        a.argon2_memory_kib = 19_456;
        a.argon2_iterations = 2;
        c.limits.signin_failures = 10_000;
        c
    })
    .await;
    app.user("known@example.com").await;
    let mut known: Vec<Duration> = Vec::new();
    let mut unknown: Vec<Duration> = Vec::new();
    for i in 0..12 {
        for (email, out) in [
            ("known@example.com", &mut known),
            (&*format!("nobody{i}@example.com"), &mut unknown),
        ] {
            let started = Instant::now();
            let r = app.signin(email, "not the password").await;
            out.push(started.elapsed());
            expect_error(r, 401, "invalid_credentials").await;
        }
    }
    // The fastest of several tries is the cost itself; medians drift with whatever else the
    // machine runs (seen failing at a load of 10 on 2 cores).
    let fastest = |v: &[Duration]| v.iter().min().copied().unwrap_or_default().as_secs_f64();
    let (k, u) = (fastest(&known), fastest(&unknown));
    eprintln!(
        "signin fastest of 12: known email {:.1} ms, unknown email {:.1} ms",
        k * 1e3,
        u * 1e3
    );
    let ratio = u / k;
    assert!(
        (0.6..1.67).contains(&ratio),
        "unknown/known = {ratio:.2} ({u:.4}s vs {k:.4}s)"
    );
    // Both pay for a real hash, so neither answers in microseconds.
    assert!(u > 0.002 && k > 0.002, "{u} {k}");
}

#[tokio::test]
async fn error_bodies_never_carry_internals() {
    let app = TestApp::with_auth().await;
    let token = app.user("e@example.com").await;
    let probes = [
        app.post_raw(
            "/v1/memory/remember",
            "{\"note\": \"x\", \"project_id\": \"p\"'; DROP TABLE users;--",
        )
        .await,
        app.get(
            "/v1/memory/list?limit=99999999999999999999999",
            Some(&token),
        )
        .await,
        app.get("/v1/memory/recall?project_id=%00", Some(&token))
            .await,
        app.post_raw("/v1/auth/signin", vec![0xff, 0xfe, 0x00])
            .await,
    ];
    for r in probes {
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        assert!((400..500).contains(&status), "{status} {text}");
        let lower = text.to_lowercase();
        for leak in [
            "select ",
            "insert ",
            "sqlite",
            "sqlx",
            "panicked",
            "backtrace",
            "/src/",
            ".rs:",
        ] {
            assert!(!lower.contains(leak), "{leak} in {text}");
        }
    }
    assert_eq!(
        body(app.me(Some(&token)).await).await["email"],
        "e@example.com"
    );
}
