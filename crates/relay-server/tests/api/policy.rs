//! The pass-through policy (issue 38) over HTTP, on either store: who pays is settled before the
//! body is read, a call cannot multiply its bill or pass its budget, provider-side tools and
//! state are refused, Relay owns the identifiers providers see, and the tokens a provider
//! counted are recorded however the call ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use axum::routing::post;
use relay_server::config::{Config, ModelConfig, ProviderConfig, ProviderKind};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::agent::with_fake;
use crate::fake_upstream::FakeUpstream;
use crate::helpers::{TestApp, auth_config, body, expect_error, open_config};

fn chat(extra: Value) -> Value {
    let mut b = json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}]});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

async fn admin_patch(app: &TestApp, admin: &str, email: &str, patch: Value) {
    let r = app
        .client
        .patch(app.url(&format!("/v1/admin/users/{email}")))
        .bearer_auth(admin)
        .json(&patch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

async fn make_admin(app: &TestApp, email: &str) -> String {
    let token = app.user(email).await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        email,
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    token
}

/// The head of a POST whose body never comes, and the status line the relay answers with.
async fn status_without_the_body(app: &TestApp, path: &str, token: Option<&str>) -> String {
    let addr = app
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n{auth}content-length: 16777215\r\n\r\n{{\"model\""
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("the relay answered before the body arrived")
        .unwrap();
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_doors_refuse_an_unauthenticated_or_spent_caller_before_reading_the_body() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| with_fake(auth_config(dir), &fake)).await;
    for path in ["/v1/messages", "/v1/chat/completions", "/v1/responses"] {
        let status = status_without_the_body(&app, path, None).await;
        assert!(status.contains(" 401 "), "{path}: {status}");
    }
    // An account with no quota left is refused before its upload too.
    let admin = make_admin(&app, "root@example.com").await;
    let ann = app.user("ann@example.com").await;
    admin_patch(&app, &admin, "ann@example.com", json!({"limit": 0})).await;
    let status = status_without_the_body(&app, "/v1/chat/completions", Some(&ann)).await;
    assert!(status.contains(" 403 "), "{status}");
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_refused_with_408() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = with_fake(open_config(dir), &fake);
        c.server.body_timeout_ms = 200;
        c
    })
    .await;
    let status = status_without_the_body(&app, "/v1/chat/completions", None).await;
    assert!(status.contains(" 408 "), "{status}");
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn multipliers_billed_extras_and_provider_state_are_refused_naming_the_field() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| with_fake(open_config(dir), &fake)).await;
    let cases = [
        (json!({"n": 128, "max_tokens": 4096}), "n:"),
        (json!({"service_tier": "priority"}), "service_tier:"),
        (
            json!({"logprobs": true, "top_logprobs": 20}),
            "top_logprobs:",
        ),
        (
            json!({"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}),
            "modalities:",
        ),
        (
            json!({"tools": [{"type": "mcp", "server_url": "https://attacker.example", "require_approval": "never"}]}),
            "tools[0]:",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "audio": {"id": "audio_1"}}, {"role": "user", "content": "again"}]}),
            "messages[1].audio.id:",
        ),
    ];
    for (extra, field) in cases {
        let r = app
            .post("/v1/chat/completions", None, &chat(extra.clone()))
            .await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{extra}");
        let b = body(r).await;
        let message = b["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{extra}: {message}");
    }
    assert!(fake.requests().is_empty(), "the provider saw none of them");
    // The free tiers pass.
    let r = app
        .post(
            "/v1/chat/completions",
            None,
            &chat(json!({"service_tier": "flex", "n": 1})),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(fake.requests()[0]["service_tier"], "flex");
}

#[tokio::test]
async fn an_operator_allows_priority_and_logprobs_per_model() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = with_fake(open_config(dir), &fake);
        c.models[0].service_tiers = vec!["priority".into()];
        c.models[0].features = vec!["logprobs".into()];
        c
    })
    .await;
    let r = app
        .post(
            "/v1/chat/completions",
            None,
            &chat(json!({"service_tier": "priority", "logprobs": true, "top_logprobs": 2})),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let sent = &fake.requests()[0];
    assert_eq!(
        (&sent["service_tier"], &sent["top_logprobs"]),
        (&json!("priority"), &json!(2))
    );
}

#[tokio::test]
async fn relay_owns_store_the_abuse_identifiers_and_the_cache_key_namespace() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| with_fake(auth_config(dir), &fake)).await;
    let ann = app.user("ann@example.com").await;
    let bob = app.user("bob@example.com").await;
    let extra = json!({"store": true, "user": "bob@example.com", "safety_identifier": "bob",
        "prompt_cache_key": "shared", "temperature": 0.25, "seed": 7});
    for token in [&ann, &bob] {
        let r = app
            .post("/v1/chat/completions", Some(token), &chat(extra.clone()))
            .await;
        assert_eq!(r.status(), StatusCode::OK);
    }
    let sent = fake.requests();
    let (a, b) = (&sent[0], &sent[1]);
    assert_eq!((&a["store"], &b["store"]), (&json!(false), &json!(false)));
    let id = a["user"].as_str().unwrap();
    assert!(id.starts_with("relay-"), "{id}");
    assert_eq!(a["safety_identifier"], id);
    assert_ne!(a["user"], b["user"], "each account has its own identifier");
    assert_ne!(
        a["user"], "bob@example.com",
        "no client names another account"
    );
    assert_eq!(a["prompt_cache_key"], format!("{id}:shared"));
    assert_ne!(a["prompt_cache_key"], b["prompt_cache_key"]);
    // What Relay does not own arrives unchanged.
    assert_eq!((&a["temperature"], &a["seed"]), (&json!(0.25), &json!(7)));
}

/// An OpenAI-compatible provider that spends exactly what it is allowed: 10 prompt tokens and
/// the whole output cap the call names (or 50,000 when it names none).
async fn greedy_provider() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |body: Bytes| {
            let log = log.clone();
            async move {
                let request: Value = serde_json::from_slice(&body).unwrap();
                log.lock().unwrap().push(request.clone());
                let cap = request["max_tokens"]
                    .as_u64()
                    .or(request["max_completion_tokens"].as_u64())
                    .unwrap_or(50_000);
                let chunk = |v: Value| format!("data: {v}\n\n");
                let text = chunk(json!({"choices": [{"index": 0, "delta": {"content": "ok"}}]}));
                let usage = chunk(
                    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": cap}}),
                );
                // A moment's work, so the calls overlap.
                tokio::time::sleep(Duration::from_millis(50)).await;
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(format!("{text}{usage}data: [DONE]\n\n")))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), seen)
}

fn greedy_config(mut c: Config, base_url: String) -> Config {
    c.providers = vec![ProviderConfig {
        base_url: Some(base_url),
        ..ProviderConfig::new("greedy", ProviderKind::Openai)
    }];
    c.models = vec![ModelConfig {
        name: "m1".into(),
        provider: "greedy".into(),
        upstream: "up-1".into(),
        max_output_tokens: Some(4096),
        ..Default::default()
    }];
    c.routing.retries = 0;
    c.limits.agent_burst = 1_000;
    c.limits.agent_per_minute = 60_000;
    c.usage.flush_ms = 5;
    c
}

async fn tokens_used(app: &TestApp, token: &str) -> i64 {
    body(app.me(Some(token)).await).await["tokens_used"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn output_is_clamped_to_the_model_cap_and_concurrent_calls_stay_within_the_budget() {
    let (url, seen) = greedy_provider().await;
    let app = TestApp::spawn_with(|dir| greedy_config(auth_config(dir), url)).await;
    let admin = make_admin(&app, "root@example.com").await;
    let ann = app.user("ann@example.com").await;
    admin_patch(
        &app,
        &admin,
        "ann@example.com",
        json!({"token_budget": 10_000, "limit": -1}),
    )
    .await;

    // One call asking for 128 choices of 100,000 tokens: refused; one choice is clamped to the model's cap.
    let r = app
        .post(
            "/v1/chat/completions",
            Some(&ann),
            &chat(json!({"n": 128, "max_tokens": 100_000})),
        )
        .await;
    expect_error_openai(r, 400).await;
    let r = app
        .post(
            "/v1/chat/completions",
            Some(&ann),
            &chat(json!({"max_tokens": 100_000})),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(seen.lock().unwrap()[0]["max_tokens"], 4096);

    // 30 calls at once against what is left: none passes the budget together.
    let calls = (0..30).map(|_| {
        let app = &app;
        let ann = &ann;
        async move {
            app.post(
                "/v1/chat/completions",
                Some(ann),
                &chat(json!({"max_tokens": 4096})),
            )
            .await
            .status()
        }
    });
    let statuses = futures::future::join_all(calls).await;
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::FORBIDDEN)
        .count();
    assert!(refused > 0, "{statuses:?}");
    assert!(
        statuses
            .iter()
            .all(|s| *s == StatusCode::OK || *s == StatusCode::FORBIDDEN),
        "{statuses:?}"
    );
    let answered = statuses.len() - refused + 1;
    let settled = async {
        loop {
            let page = body(app.get("/v1/usage/legs?limit=100", Some(&ann)).await).await;
            if page["items"].as_array().unwrap().len() >= answered {
                return;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), settled)
        .await
        .unwrap();
    let used = tokens_used(&app, &ann).await;
    assert!(used <= 11_000, "{used} tokens against a budget of 10,000");
    assert!(used >= 4_106, "{used}");
}

async fn expect_error_openai(r: reqwest::Response, status: u16) -> Value {
    assert_eq!(r.status().as_u16(), status);
    body(r).await
}

/// An Anthropic provider that counts a large prompt in `message_start`, streams one piece of
/// text, then goes silent (the client leaves first).
async fn counting_then_silent_provider() -> String {
    let app = axum::Router::new().route(
        "/v1/messages",
        post(|| async {
            let event = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
            let head = event("message_start", json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "claude", "content": [], "stop_reason": null,
                "usage": {"input_tokens": 200_000, "output_tokens": 1}}}))
                + &event("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
                + &event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello there"}}));
            let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(head)) })
                .chain(futures::stream::pending());
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

use futures::StreamExt;

#[tokio::test]
async fn a_client_that_leaves_early_is_billed_what_the_provider_counted() {
    let url = counting_then_silent_provider().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        c.providers = vec![ProviderConfig {
            base_url: Some(url),
            ..ProviderConfig::new("anthropic", ProviderKind::Anthropic)
        }];
        c.models = vec![ModelConfig {
            name: "claude".into(),
            provider: "anthropic".into(),
            upstream: "claude".into(),
            ..Default::default()
        }];
        c.usage.flush_ms = 5;
        c.usage.drain_ms = 100;
        c
    })
    .await;
    let ann = app.user("ann@example.com").await;
    let call = json!({"model": "claude", "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    for _ in 0..3 {
        let r = app.post("/v1/messages", Some(&ann), &call).await;
        assert_eq!(r.status(), StatusCode::OK);
        let mut chunks = r.bytes_stream();
        let mut seen = String::new();
        while !seen.contains("Hello there") {
            let chunk = chunks.next().await.unwrap().unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        // The client hangs up after the first text.
    }
    let legs = async {
        loop {
            let page = body(app.get("/v1/usage/legs", Some(&ann)).await).await;
            let items = page["items"].as_array().unwrap().clone();
            if items.len() >= 3 {
                return items;
            }
            tokio::task::yield_now().await;
        }
    };
    let legs = tokio::time::timeout(Duration::from_secs(10), legs)
        .await
        .unwrap();
    for leg in &legs {
        assert_eq!(leg["status"], "cancelled", "{leg}");
        assert_eq!(leg["input_tokens"], 200_000, "{leg}");
        assert!(leg["output_tokens"].as_i64().unwrap() >= 1, "{leg}");
    }
    assert_eq!(
        tokens_used(&app, &ann).await,
        legs.iter()
            .map(|l| l["input_tokens"].as_i64().unwrap() + l["output_tokens"].as_i64().unwrap())
            .sum::<i64>()
    );
}

#[tokio::test]
async fn unlisted_anthropic_betas_are_dropped_and_listed_ones_pass() {
    let fake = crate::caching_fake::CachingUpstream::start().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.providers = vec![ProviderConfig {
            base_url: Some(fake.url.clone()),
            ..ProviderConfig::new("anthropic", ProviderKind::Anthropic)
        }];
        c.models = vec![ModelConfig {
            name: "claude".into(),
            provider: "anthropic".into(),
            upstream: "claude".into(),
            ..Default::default()
        }];
        c
    })
    .await;
    let r = app
        .client
        .post(app.url("/v1/messages"))
        .header("anthropic-beta", "claude-code-20250219,made-up-2099-01-01,context-1m-2025-08-07")
        .json(&json!({"model": "claude", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"user_id": "someone-else"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        fake.header(0, "anthropic-beta").as_deref(),
        Some("claude-code-20250219")
    );
    let sent = &fake.bodies()[0];
    assert_ne!(sent["metadata"]["user_id"], "someone-else");
    let _ = expect_error;
}

/// An Anthropic provider that runs two web searches for every call, and records what it got.
async fn searching_provider() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/v1/messages",
        post(move |body: Bytes| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(serde_json::from_slice::<Value>(&body).unwrap());
                let event = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
                let sse = event("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}}))
                    + &event("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
                    + &event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "found it"}}))
                    + &event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                        "usage": {"output_tokens": 12, "server_tool_use": {"web_search_requests": 2}}}))
                    + &event("message_stop", json!({"type": "message_stop"}));
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(sse))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn an_allowed_hosted_tool_reaches_the_provider_and_its_runs_are_metered() {
    let (url, seen) = searching_provider().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.providers = vec![ProviderConfig {
            base_url: Some(url),
            ..ProviderConfig::new("anthropic", ProviderKind::Anthropic)
        }];
        let model = |name: &str, hosted: Vec<String>| ModelConfig {
            name: name.into(),
            provider: "anthropic".into(),
            upstream: "claude".into(),
            hosted_tools: hosted,
            ..Default::default()
        };
        c.models = vec![
            model("searcher", vec!["web_search".into()]),
            model("plain", vec![]),
        ];
        c.usage.flush_ms = 5;
        c
    })
    .await;
    let call = |model: &str| {
        json!({"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "look it up"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
                {"type": "code_execution_20250522", "name": "code_execution"}]})
    };
    // Code execution is allowed for neither model: refused, naming the tool.
    let r = app.post("/v1/messages", None, &call("searcher")).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let b = body(r).await;
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("tools[1]:"),
        "{b}"
    );
    let mut only_search = call("searcher");
    only_search["tools"].as_array_mut().unwrap().pop();
    let r = app.post("/v1/messages", None, &only_search).await;
    assert_eq!(r.status(), StatusCode::OK);
    // An allowed tool passes unchanged (Relay's own cache breakpoint aside).
    let mut sent = seen.lock().unwrap()[0]["tools"].clone();
    sent[0].as_object_mut().unwrap().remove("cache_control");
    assert_eq!(sent, only_search["tools"]);
    let legs = async {
        loop {
            let page = body(app.get("/v1/usage/legs", None).await).await;
            if let Some(leg) = page["items"].as_array().unwrap().first() {
                return leg.clone();
            }
            tokio::task::yield_now().await;
        }
    };
    let leg = tokio::time::timeout(Duration::from_secs(10), legs)
        .await
        .unwrap();
    assert_eq!(
        (&leg["server_tool_uses"], &leg["estimated"]),
        (&json!(2), &json!(false)),
        "{leg}"
    );
    // A model that does not allow search: the search tool agents send by default is left out.
    let mut plain = only_search.clone();
    plain["model"] = json!("plain");
    let r = app.post("/v1/messages", None, &plain).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        seen.lock().unwrap()[1]
            .get("tools")
            .is_none_or(|t| t.as_array().unwrap().is_empty())
    );
}

#[tokio::test]
async fn the_responses_door_refuses_tool_names_every_other_route_refuses() {
    let app = TestApp::open().await;
    let call = |tools: Value| json!({"model": "auto", "input": "hi", "tools": tools});
    let bad = [
        (
            json!([{"type": "function", "name": "bad name!", "parameters": {"type": "object"}}]),
            "tools[0].name",
        ),
        (json!([{"type": "custom", "name": "a/b"}]), "tools[0].name"),
        (
            json!([{"type": "function", "name": "ok", "parameters": {"type": "object"}},
                {"type": "namespace", "name": "my ns", "tools": [{"type": "function", "name": "x.y", "parameters": {"type": "object"}}]}]),
            "tools[1].tools[0].name",
        ),
    ];
    for (tools, field) in bad {
        let res = app.post("/v1/responses", None, &call(tools)).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        let b = body(res).await;
        assert_eq!(b["error"]["type"], "invalid_request_error", "{b}");
        assert!(
            b["error"]["message"].as_str().unwrap().contains(field),
            "{b}"
        );
    }
    // The same tools with valid names are served.
    let good = json!([{"type": "function", "name": "read_file", "parameters": {"type": "object"}},
        {"type": "namespace", "name": "fs", "tools": [{"type": "function", "name": "list", "parameters": {"type": "object"}}]}]);
    let res = app.post("/v1/responses", None, &call(good)).await;
    assert_eq!(res.status(), StatusCode::OK);
}
