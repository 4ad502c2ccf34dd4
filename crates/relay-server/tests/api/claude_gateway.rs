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

#[tokio::test]
async fn count_tokens_is_rate_limited_apart_from_legs_and_refused_once_the_budget_is_spent() {
    let fake = FakeUpstream::start().await;
    let app = crate::helpers::TestApp::spawn_with(|dir| {
        let mut c = crate::agent::with_fake(crate::helpers::auth_config(dir), &fake);
        c.limits.agent_per_minute = 1;
        c.limits.agent_burst = 2;
        c.usage.flush_ms = 5;
        c
    })
    .await;
    let ann = app.user("ann@example.com").await;
    let count = |token: String| {
        let req = json!({"model": "m1", "messages": [{"role": "user", "content": "hello"}]});
        app.client
            .post(app.url("/v1/messages/count_tokens"))
            .header("x-api-key", token)
            .json(&req)
            .send()
    };
    for _ in 0..2 {
        assert_eq!(count(ann.clone()).await.unwrap().status(), StatusCode::OK);
    }
    let r = count(ann.clone()).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().contains_key("retry-after"));
    let e = body(r).await;
    assert_eq!(
        (&e["type"], &e["error"]["type"]),
        (&json!("error"), &json!("rate_limit_error"))
    );
    // Counting took no leg's place.
    let (status, _) = app.leg(Some(&ann), &crate::agent::user_says("hi")).await;
    assert_eq!(status, StatusCode::OK);

    // bob's budget (10 tokens) is spent by one leg (12 + 3): his counts are refused.
    let bob = app.user("bob@example.com").await;
    let auth = app.state.auth().unwrap();
    let user = auth
        .list_users()
        .await
        .unwrap()
        .into_iter()
        .find(|u| u.email == "bob@example.com")
        .unwrap();
    relay_server::operator::set_token_budget(app.state.ledger().store().as_ref(), &user, 10)
        .await
        .unwrap();
    assert_eq!(count(bob.clone()).await.unwrap().status(), StatusCode::OK);
    let (status, _) = app.leg(Some(&bob), &crate::agent::user_says("hi")).await;
    assert_eq!(status, StatusCode::OK);
    let spent = async {
        while body(app.me(Some(&bob)).await).await["tokens_remaining"] != 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), spent)
        .await
        .expect("the leg's record was not written within 10 s");
    let r = count(bob.clone()).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let e = body(r).await;
    assert_eq!(
        (&e["type"], &e["error"]["type"]),
        (&json!("error"), &json!("permission_error"))
    );
}

#[tokio::test]
async fn count_tokens_bounds_the_providers_answer_in_size_and_in_time() {
    use futures::StreamExt;
    use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    // First call: a 300 MB answer, 64 KiB at a time; then an answer whose body stalls after its
    // headers; then one with no headers at all.
    let calls = Arc::new(AtomicUsize::new(0));
    let sent = Arc::new(AtomicUsize::new(0));
    let (c, s) = (calls.clone(), sent.clone());
    let counter = axum::Router::new().route(
        "/v1/messages/count_tokens",
        axum::routing::post(move || {
            let (calls, sent) = (c.clone(), s.clone());
            async move {
                let stream = match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => futures::stream::unfold(0_usize, move |n| {
                        let sent = sent.clone();
                        async move {
                            if n >= 300 * 1024 * 1024 {
                                return None;
                            }
                            tokio::time::sleep(Duration::from_micros(200)).await;
                            let chunk = if n == 0 {
                                let mut c = br#"{"input_tokens": 1, "pad": ""#.to_vec();
                                c.resize(64 * 1024, b'x');
                                c
                            } else {
                                vec![b'x'; 64 * 1024]
                            };
                            sent.fetch_add(chunk.len(), Ordering::SeqCst);
                            Some((
                                Ok::<_, std::io::Error>(axum::body::Bytes::from(chunk)),
                                n + 64 * 1024,
                            ))
                        }
                    })
                    .boxed(),
                    1 => futures::stream::once(async { Ok(axum::body::Bytes::from_static(b"{")) })
                        .chain(futures::stream::pending())
                        .boxed(),
                    _ => futures::stream::pending().boxed(),
                };
                axum::response::Response::builder()
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from_stream(stream))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, counter).await.unwrap() });
    let fake = FakeUpstream::start().await;
    let app = crate::helpers::TestApp::spawn_with(|dir| {
        let mut c = crate::agent::with_fake(crate::helpers::open_config(dir), &fake);
        c.routing.idle_timeout_ms = 500;
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
    // "user" and "hello": 9 characters, an estimate of 3.
    let req = json!({"model": "claude", "messages": [{"role": "user", "content": "hello"}]});
    for case in ["300 MB answer", "stalled body", "no headers"] {
        let started = Instant::now();
        let r = app.post("/v1/messages/count_tokens", None, &req).await;
        let took = started.elapsed();
        assert_eq!(r.status(), StatusCode::OK, "{case}");
        assert_eq!(body(r).await["input_tokens"], 3, "{case}: Relay's estimate");
        assert!(took < Duration::from_secs(5), "{case}: {took:?}");
        if case == "300 MB answer" {
            // Relay stopped reading past 1 MiB; what the sockets' buffers took is all that left.
            let bytes = sent.load(Ordering::SeqCst);
            assert!(bytes < 32 * 1024 * 1024, "{bytes} bytes sent");
            assert!(bytes > 1024 * 1024, "{bytes} bytes sent");
        } else {
            assert!(took >= Duration::from_millis(450), "{case}: {took:?}");
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}
