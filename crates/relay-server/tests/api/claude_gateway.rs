//! Claude Code's gateway endpoints over real HTTP: `POST /v1/messages/count_tokens` (forwarded to
//! an `anthropic` provider, else estimated), `?beta=true` on both Messages routes, and the models
//! list in Anthropic's shape with `x-api-key`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent::auth_app;
use crate::fake_upstream::FakeUpstream;
use crate::helpers::body;

#[tokio::test]
async fn claude_codes_gateway_endpoints() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 5).await;
    let token = app.user("cc@example.com").await;
    let get_models = |key: Option<&str>, anthropic: bool| {
        let mut r = app.client.get(app.url("/v1/models"));
        if let Some(k) = key {
            r = r.header("x-api-key", k);
        }
        if anthropic {
            r = r.header("anthropic-version", "2023-06-01");
        }
        r.send()
    };
    let r = get_models(Some(&token), false).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(r).await["object"], "list");
    let r = get_models(Some(&token), true).await.unwrap();
    let b = body(r).await;
    assert_eq!(b["data"][0]["type"], "model");
    assert_eq!(b["data"][1]["id"], "m1");
    assert_eq!(
        (
            b["first_id"].as_str(),
            b["last_id"].as_str(),
            b["has_more"].as_bool()
        ),
        (Some("auto"), Some("m2"), Some(false))
    );
    assert!(b["data"][0]["created_at"].as_str().unwrap().ends_with('Z'));
    let r = get_models(Some("rly_wrong"), true).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(body(r).await["type"], "error");
    // count_tokens (?beta=true as Claude Code sends it): an estimate, no unit used.
    let count = json!({"model": "auto", "system": "12345678", "messages": [{"role": "user", "content": "abcd"}]});
    let r = app
        .client
        .post(app.url("/v1/messages/count_tokens?beta=true"))
        .header("x-api-key", &token)
        .json(&count)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let n = body(r).await["input_tokens"].as_u64().unwrap();
    assert!((4..=10).contains(&n), "{n}");
    let r = app
        .client
        .post(app.url("/v1/messages/count_tokens"))
        .header("x-api-key", &token)
        .json(&json!({"model": "auto"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body(app.me(Some(&token)).await).await["used"], 0);
    let r = app.client.post(app.url("/v1/messages?beta=true")).header("x-api-key", &token)
        .json(&json!({"model": "auto", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn count_tokens_is_forwarded_to_an_anthropic_provider_with_the_upstream_model() {
    use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = seen.clone();
    let counter = axum::Router::new().route(
        "/v1/messages/count_tokens",
        axum::routing::post(move |axum::Json(b): axum::Json<Value>| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(b);
                axum::Json(json!({"input_tokens": 1234}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, counter).await.unwrap() });
    let fake = FakeUpstream::start().await;
    let app = crate::helpers::TestApp::spawn_with(|dir| {
        let mut c = crate::agent::with_fake(crate::helpers::open_config(dir), &fake);
        c.providers.push(ProviderConfig {
            base_url: Some(url),
            ..ProviderConfig::new("claude", ProviderKind::Anthropic)
        });
        c.models.push(ModelConfig {
            name: "claude".into(),
            provider: "claude".into(),
            upstream: "claude-haiku-4-5".into(),
            ..Default::default()
        });
        c
    })
    .await;
    let req = json!({"model": "claude", "messages": [{"role": "user", "content": "hello"}]});
    let r = app
        .post("/v1/messages/count_tokens?beta=true", None, &req)
        .await;
    assert_eq!(body(r).await["input_tokens"], 1234);
    assert_eq!(seen.lock().unwrap()[0]["model"], "claude-haiku-4-5");
    // A model on an OpenAI-shaped provider is estimated by Relay: "user" and "hello", 9 characters.
    let req = json!({"model": "m1", "messages": [{"role": "user", "content": "hello"}]});
    let r = app.post("/v1/messages/count_tokens", None, &req).await;
    assert_eq!(body(r).await["input_tokens"], 3);
    assert_eq!(seen.lock().unwrap().len(), 1);
}
