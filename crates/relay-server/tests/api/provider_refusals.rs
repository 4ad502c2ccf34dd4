//! Issue 42, "say why", for the refusals that come before any output with a body only the
//! provider can explain: OpenAI's 429 `insufficient_quota` (a spent account, not a rate limit)
//! and Anthropic's 429 `rate_limit_error` and 400 "credit balance is too low". The provider's
//! own words reach the user, sanitised, on the native leg and in each door's error shape.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
use serde_json::{Value, json};

use crate::agent::user_says;
use crate::helpers::{TestApp, body, open_config};

/// OpenAI's real answer for an account whose credit is spent (HTTP 429).
fn openai_insufficient_quota() -> Value {
    json!({"error": {
        "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        "type": "insufficient_quota",
        "param": null,
        "code": "insufficient_quota"}})
}

/// Anthropic's rate-limit answer (HTTP 429), naming the organisation by its id.
fn anthropic_rate_limit() -> Value {
    json!({"type": "error", "error": {
        "type": "rate_limit_error",
        "message": "This request would exceed the rate limit for your organization (3b2c1d0e-5f6a-4b7c-8d9e-0a1b2c3d4e5f) of 50,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits?org=secret. Please reduce the prompt length or try again later."},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
}

/// Anthropic's answer for an account without credit (HTTP 400).
fn anthropic_no_credit() -> Value {
    json!({"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fz"})
}

/// A provider that refuses every call with `status` and `body`, on any path.
async fn refusing_provider(status: u16, body: Value) -> String {
    let status = StatusCode::from_u16(status).unwrap();
    let app = axum::Router::new().fallback(move || {
        let body = body.to_string();
        async move {
            let mut r: Response = (status, body).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// An open-mode relay whose one model `m` is on a provider of `kind` at `base_url`.
async fn app_on(kind: ProviderKind, base_url: String) -> TestApp {
    TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.providers = vec![ProviderConfig {
            base_url: Some(base_url),
            ..ProviderConfig::new("p", kind)
        }];
        c.models = vec![ModelConfig {
            name: "m".into(),
            provider: "p".into(),
            upstream: "up".into(),
            ..Default::default()
        }];
        c.routing.auto = vec!["m".into()];
        c.routing.retries = 0;
        c.limits.agent_burst = 1_000;
        c
    })
    .await
}

/// Every route's answer to one call, as (route, HTTP status, the error message shown).
async fn every_route(app: &TestApp) -> Vec<(&'static str, StatusCode, Value)> {
    let mut out = Vec::new();
    let r = app.post("/v1/agent/stream", None, &user_says("hi")).await;
    out.push(("native", r.status(), body(r).await));
    let r = app
        .post(
            "/v1/chat/completions",
            None,
            &json!({"model": "m", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    out.push(("chat", r.status(), body(r).await));
    let r = app
        .post(
            "/v1/messages",
            None,
            &json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    out.push(("messages", r.status(), body(r).await));
    let r = app
        .post("/v1/responses", None, &json!({"model": "m", "input": "x"}))
        .await;
    out.push(("responses", r.status(), body(r).await));
    let r = app
        .post(
            "/v1/chat/completions",
            None,
            &json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    out.push(("chat streamed", r.status(), body(r).await));
    out
}

/// The message in each route's own error shape: the native `{error, message}`, Anthropic's
/// `{type: "error", error: {type, message}}`, OpenAI's `{error: {message, type, code}}`.
fn message(route: &str, b: &Value) -> String {
    let m = match route {
        "native" => &b["message"],
        "messages" => {
            assert_eq!(b["type"], "error", "{b}");
            &b["error"]["message"]
        }
        _ => &b["error"]["message"],
    };
    m.as_str()
        .unwrap_or_else(|| panic!("{route}: no message in {b}"))
        .to_owned()
}

#[tokio::test]
async fn openais_insufficient_quota_429_reaches_the_user_on_every_route() {
    let app = app_on(
        ProviderKind::Openai,
        format!(
            "{}/v1",
            refusing_provider(429, openai_insufficient_quota()).await
        ),
    )
    .await;
    for (route, status, b) in every_route(&app).await {
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{route}: {b}");
        let m = message(route, &b);
        assert!(
            m.contains(
                "You exceeded your current quota, please check your plan and billing details"
            ) && m.contains("insufficient_quota")
                && m.contains("429"),
            "{route}: {m}"
        );
        assert!(m.chars().count() <= 900, "{route}: {m}");
    }
    // The native leg's machine code and Retry-After stay what a rate limit has always given.
    let r = app.post("/v1/agent/stream", None, &user_says("hi")).await;
    assert_eq!(r.headers()["retry-after"], "1");
    assert_eq!(body(r).await["error"], "rate_limited");
}

#[tokio::test]
async fn anthropics_429_and_400_bodies_reach_the_user_without_their_ids() {
    let app = app_on(
        ProviderKind::Anthropic,
        refusing_provider(429, anthropic_rate_limit()).await,
    )
    .await;
    for (route, status, b) in every_route(&app).await {
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{route}: {b}");
        let m = message(route, &b);
        assert!(
            m.contains("This request would exceed the rate limit for your organization")
                && m.contains("rate_limit_error")
                && m.contains("https://docs.claude.com/en/api/rate-limits"),
            "{route}: {m}"
        );
        for secret in ["3b2c1d0e", "0a1b2c3d4e5f", "org=secret", "?"] {
            assert!(!m.contains(secret), "{route}: {secret} in {m}");
        }
    }

    let app = app_on(
        ProviderKind::Anthropic,
        refusing_provider(400, anthropic_no_credit()).await,
    )
    .await;
    for (route, status, b) in every_route(&app).await {
        // The provider refused Relay's call, not the client's request: a 502, as for a wrong key.
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{route}: {b}");
        let m = message(route, &b);
        assert!(
            m.contains("Your credit balance is too low to access the Anthropic API")
                && m.contains("invalid_request_error")
                && m.contains("400"),
            "{route}: {m}"
        );
    }
}
