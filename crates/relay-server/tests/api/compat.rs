//! The compatible endpoints over real HTTP against the fake upstream: the models list, Chat
//! Completions and Messages (streamed and not), what the upstream receives, identity, quota,
//! note injection with its receipt, and errors in each API's own shape.

use std::time::Duration;

use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent::{auth_app, open_app, with_fake};
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::{TestApp, body, open_config};

/// A fake Anthropic upstream that answers every `/v1/messages` with one recorded stream.
pub async fn anthropic_fixture_upstream(fixture: &str) -> String {
    let recorded = crate::helpers::fixture(fixture);
    let app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move || {
            let recorded = recorded.clone();
            async move {
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(recorded))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// The fake's two models plus `claude`, served by a recorded Anthropic stream.
pub async fn app_with_anthropic(fake: &FakeUpstream, fixture: &str) -> TestApp {
    let anthropic = anthropic_fixture_upstream(fixture).await;
    TestApp::spawn_with(|dir| {
        let mut c = with_fake(open_config(dir), fake);
        c.providers.push(ProviderConfig {
            base_url: Some(anthropic),
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
    .await
}

/// The `data:` payloads of an SSE body, and the event names beside them.
pub fn sse_events(text: &str) -> Vec<(String, String)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .filter_map(|e| {
            let mut name = String::from("message");
            let mut data = None;
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_owned();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = Some(d.to_owned());
                }
            }
            data.map(|d| (name, d))
        })
        .collect()
}

fn chat(stream: bool) -> Value {
    json!({"model": "auto", "stream": stream, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}]}
    ]})
}

#[tokio::test]
async fn models_lists_auto_and_every_configured_model() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    let b = body(app.get("/v1/models", None).await).await;
    assert_eq!(b["object"], "list");
    let ids: Vec<&str> = b["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["auto", "m1", "m2"]);
    assert_eq!(b["data"][1]["object"], "model");
    assert_eq!(b["data"][1]["owned_by"], "fake");
    assert!(b["data"][1]["created"].as_i64().unwrap() > 0);
}

#[tokio::test]
async fn chat_completion_unstreamed_has_text_finish_and_provider_usage() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push("up-1", up::text_reply(&["Hi", " you"]));
    let r = app.post("/v1/chat/completions", None, &chat(false)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["x-relay-note-ids"], "");
    let b = body(r).await;
    assert_eq!(b["object"], "chat.completion");
    assert_eq!(b["model"], "m1");
    assert_eq!(b["choices"][0]["message"]["content"], "Hi you");
    assert_eq!(b["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        b["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
    );
    let sent = &fake.requests()[0];
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    // The client's own content parts reach a provider of its family unchanged.
    assert_eq!(
        sent["messages"][1]["content"],
        json!([{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}])
    );
}

#[tokio::test]
async fn chat_completion_streams_parallel_tool_calls_with_indices_then_usage_and_done() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    let call = |i: u32, id: &str, args: &str| {
        up::data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "id": id, "type": "function", "function": {"name": "read_file", "arguments": args}}]}}]}))
    };
    fake.push(
        "up-1",
        Reply::Sse {
            chunks: vec![
                call(0, "c1", "{\"path\":\"a\"}"),
                call(1, "c2", "{\"path\":\"b\"}"),
                up::finish("tool_calls"),
                up::usage(40, 9),
                up::DONE.into(),
            ],
            pause: Duration::ZERO,
        },
    );
    let mut req = chat(true);
    req["stream_options"] = json!({"include_usage": true});
    req["tools"] = json!([{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]);
    let r = app.post("/v1/chat/completions", None, &req).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let chunks: Vec<Value> = sse_events(&text)
        .into_iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect();
    // A provider of the client's own API answers in its own chunks (issue 39): this fake's carry
    // no `role`, and none was added on the way.
    assert!(
        chunks[0]["choices"][0]["delta"].get("role").is_none(),
        "{text}"
    );
    let deltas: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    // As this provider sent them: each call whole in one delta, with its index.
    assert_eq!(deltas.len(), 2, "{text}");
    for (i, (id, path)) in [("c1", "a"), ("c2", "b")].into_iter().enumerate() {
        assert_eq!(deltas[i]["index"], i);
        assert_eq!(
            (
                deltas[i]["id"].as_str(),
                deltas[i]["function"]["name"].as_str()
            ),
            (Some(id), Some("read_file"))
        );
        assert_eq!(
            deltas[i]["function"]["arguments"],
            format!("{{\"path\":\"{path}\"}}")
        );
    }
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["prompt_tokens"], 40);
    assert_eq!(last["usage"]["completion_tokens"], 9);
    // The caller's tool went upstream unchanged.
    assert_eq!(
        fake.requests()[0]["tools"][0]["function"]["name"],
        "read_file"
    );
}

#[tokio::test]
async fn chat_completion_tool_round_trip_reaches_the_upstream_with_the_callers_controls() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    let req = json!({"model": "m2", "max_completion_tokens": 50, "max_tokens": 10, "temperature": 0.5, "stop": ["\n"],
        "tool_choice": "none",
        "tools": [{"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}],
        "messages": [
        {"role": "developer", "content": "dev says"},
        {"role": "user", "content": "find x"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{\"p\":\"x\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x at line 3"}
    ]});
    let r = app.post("/v1/chat/completions", None, &req).await;
    assert_eq!(r.status(), StatusCode::OK);
    let sent = &fake.requests()[0];
    assert_eq!(sent["model"], "up-2");
    // The client's own body: both limits as it set them (the provider prefers the newer).
    assert_eq!(
        (&sent["max_tokens"], &sent["max_completion_tokens"]),
        (&json!(10), &json!(50))
    );
    assert_eq!(sent["messages"][0]["content"], "dev says");
    assert_eq!(sent["messages"][2]["tool_calls"][0]["id"], "c1");
    assert_eq!(
        sent["messages"][3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "x at line 3"})
    );
    // `none` is forwarded beside the tools (the history's calls stay described), and so are
    // the other controls.
    assert_eq!(sent["tool_choice"], "none");
    assert_eq!(sent["tools"][0]["function"]["name"], "grep");
    assert_eq!(sent["stop"], json!(["\n"]));
    assert_eq!(sent["temperature"], 0.5);
}

#[tokio::test]
async fn chat_completion_errors_use_openai_shape_and_relay_statuses() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 1).await;
    let r = app.post("/v1/chat/completions", None, &chat(false)).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let b = body(r).await;
    assert_eq!(
        (b["error"]["type"].as_str(), b["error"]["code"].as_str()),
        (Some("authentication_error"), Some("unauthorized"))
    );
    let token = app.user("c@example.com").await;
    for bad in [
        json!({"model": "auto"}),
        json!({"model": "auto", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
    ] {
        let r = app.post("/v1/chat/completions", Some(&token), &bad).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert_eq!(body(r).await["error"]["type"], "invalid_request_error");
    }
    let r = app
        .post(
            "/v1/chat/completions",
            Some(&token),
            &json!({"model": "gpt-99", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(body(r).await["error"]["code"], "unknown_model");
    assert_eq!(
        body(app.me(Some(&token)).await).await["used"],
        0,
        "a 400 takes no unit"
    );
    // Both models fail before any output: 502, and the unit is given back.
    for m in ["up-1", "up-2"] {
        fake.push(
            m,
            Reply::Status {
                status: 500,
                body: json!({"error": {"type": "server_error"}}),
                retry_after: None,
            },
        );
    }
    let r = app
        .post("/v1/chat/completions", Some(&token), &chat(false))
        .await;
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(body(r).await["error"]["type"], "api_error");
    assert_eq!(
        body(app.me(Some(&token)).await).await["used"],
        0,
        "refunded"
    );
    let r = app
        .post("/v1/chat/completions", Some(&token), &chat(false))
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = app
        .post("/v1/chat/completions", Some(&token), &chat(false))
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let b = body(r).await;
    assert_eq!(
        (b["error"]["type"].as_str(), b["error"]["code"].as_str()),
        (Some("permission_error"), Some("quota_exceeded"))
    );
}

#[tokio::test]
async fn rate_limited_upstreams_answer_429_with_retry_after() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    for m in ["up-1", "up-2"] {
        fake.push(
            m,
            Reply::Status {
                status: 429,
                body: json!({"error": {"type": "rate_limit"}}),
                retry_after: Some(30),
            },
        );
    }
    let r = app.post("/v1/messages", None, &json!({"model": "auto", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "30");
    assert_eq!(body(r).await["error"]["type"], "rate_limit_error");
}

#[tokio::test]
async fn a_failure_after_the_first_chunk_is_the_apis_in_stream_error() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push("up-1", Reply::SseThenCut(vec![up::text_chunk("par")]));
    let text = app
        .post("/v1/chat/completions", None, &chat(true))
        .await
        .text()
        .await
        .unwrap();
    let last: Value = serde_json::from_str(&sse_events(&text).last().unwrap().1).unwrap();
    assert_eq!(last["error"]["type"], "api_error", "{text}");
    assert!(!text.contains("[DONE]"));
    fake.push("up-1", Reply::SseThenCut(vec![up::text_chunk("par")]));
    let r = app.post("/v1/messages", None, &json!({"model": "auto", "max_tokens": 5, "stream": true, "messages": [{"role": "user", "content": "x"}]})).await;
    let events = sse_events(&r.text().await.unwrap());
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error");
    // A cut connection is `provider_unavailable` (503): Anthropic's `overloaded_error`.
    assert_eq!(
        serde_json::from_str::<Value>(data).unwrap()["error"]["type"],
        "overloaded_error"
    );
}

#[tokio::test]
async fn messages_unstreamed_maps_system_blocks_and_tool_results() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push(
        "up-1",
        up::tool_call_reply("call_9", "grep", "{\"pattern\":\"fn\"}"),
    );
    let req = json!({"model": "m1", "max_tokens": 64, "system": [{"type": "text", "text": "Sys."}],
    "tools": [{"name": "grep", "description": "search", "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}}}],
    "messages": [
        {"role": "user", "content": "find fns"},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, {"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "none"}]}, {"type": "text", "text": "try fn"}]}
    ]});
    let r = app
        .client
        .post(app.url("/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let b = body(r).await;
    assert_eq!(
        (
            b["type"].as_str(),
            b["model"].as_str(),
            b["stop_reason"].as_str()
        ),
        (Some("message"), Some("m1"), Some("tool_use"))
    );
    assert_eq!(
        b["content"][0],
        json!({"type": "tool_use", "id": "call_9", "name": "grep", "input": {"pattern": "fn"}})
    );
    assert_eq!(
        b["usage"],
        json!({"input_tokens": 20, "output_tokens": 5,
            "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent["max_tokens"], 64);
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Sys."})
    );
    assert_eq!(
        sent["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"pattern\":\"x\"}"
    );
    assert_eq!(
        sent["messages"][3],
        json!({"role": "tool", "tool_call_id": "t1", "content": "none"})
    );
    assert_eq!(
        sent["messages"][4],
        json!({"role": "user", "content": "try fn"})
    );
    assert_eq!(sent["tools"][0]["function"]["description"], "search");
    // max_tokens is required, as Anthropic requires it.
    let r = app
        .post(
            "/v1/messages",
            None,
            &json!({"model": "m1", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let b = body(r).await;
    assert_eq!(
        (b["type"].as_str(), b["error"]["type"].as_str()),
        (Some("error"), Some("invalid_request_error"))
    );
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tokens"),
        "{b}"
    );
}

#[tokio::test]
async fn messages_streamed_text_then_stop_with_usage() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push("up-1", up::text_reply(&["Hel", "lo"]));
    let req = json!({"model": "auto", "max_tokens": 64, "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let r = app.post("/v1/messages", None, &req).await;
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let events = sse_events(&r.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let delta: Value = serde_json::from_str(&events[2].1).unwrap();
    assert_eq!(delta["delta"], json!({"type": "text_delta", "text": "Hel"}));
    let end: Value = serde_json::from_str(&events[5].1).unwrap();
    assert_eq!(end["delta"]["stop_reason"], "end_turn");
    assert_eq!(end["usage"]["output_tokens"], 3);
}

#[tokio::test]
async fn messages_take_the_token_from_x_api_key_and_notes_come_from_the_project_header() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 5).await;
    let token = app.user("k@example.com").await;
    app.remember(Some(&token), "relay", "Use cargo nextest.")
        .await;
    let req = json!({"model": "auto", "max_tokens": 16, "messages": [{"role": "user", "content": "how to test"}]});
    let r = app
        .client
        .post(app.url("/v1/messages"))
        .header("x-api-key", "rly_wrong")
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(body(r).await["error"]["type"], "authentication_error");
    let r = app
        .client
        .post(app.url("/v1/messages"))
        .header("x-api-key", &token)
        .header("x-relay-project", "relay")
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let receipt = r.headers()["x-relay-note-ids"].to_str().unwrap().to_owned();
    assert!(
        receipt.starts_with("mem#") && receipt.ends_with("#relay#1"),
        "{receipt}"
    );
    let system = fake.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("<project-notes>") && system.contains("Use cargo nextest."),
        "{system}"
    );
    assert_eq!(
        body(app.me(Some(&token)).await).await["used"],
        1,
        "one unit per call"
    );
    // No project header, no notes.
    let r = app
        .client
        .post(app.url("/v1/messages"))
        .bearer_auth(&token)
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-relay-note-ids"], "");
    assert!(fake.requests()[1]["messages"][0]["role"] != "system");
}

#[tokio::test]
async fn an_openai_request_is_answered_by_an_anthropic_model() {
    let fake = FakeUpstream::start().await;
    let app = app_with_anthropic(
        &fake,
        "anthropic/simonw-llm-anthropic__tools_parallel.0.sse",
    )
    .await;
    let r = app
        .post(
            "/v1/chat/completions",
            None,
            &json!({"model": "claude", "messages": [{"role": "user", "content": "names"}]}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let b = body(r).await;
    assert_eq!(b["model"], "claude");
    assert_eq!(b["choices"][0]["finish_reason"], "tool_calls");
    let calls = b["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{b}");
    assert_eq!(calls[0]["id"], "toolu_01LtHJmixrs9NcWQkK8hu8hj");
    assert_eq!(calls[1]["function"]["name"], "pelican_name_generator");
    assert_eq!(b["usage"]["prompt_tokens"], 542);
}

#[tokio::test]
async fn compatible_calls_are_counted_by_route_and_as_legs_of_their_model() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    app.post("/v1/chat/completions", None, &chat(false)).await;
    let req =
        json!({"model": "m2", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]});
    app.post("/v1/messages", None, &req).await;
    let text = app.get("/metrics", None).await.text().await.unwrap();
    for key in [
        r#"relay_http_requests_total{method="POST",route="/v1/chat/completions",status="200"} 1"#,
        r#"relay_http_requests_total{method="POST",route="/v1/messages",status="200"} 1"#,
    ] {
        assert!(text.contains(key), "{key} missing from:\n{text}");
    }
    let legs: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("relay_agent_legs_total"))
        .collect();
    assert!(
        legs.iter()
            .any(|l| l.contains(r#"model="m1""#) && l.contains("done")),
        "{legs:?}"
    );
    assert!(
        legs.iter()
            .any(|l| l.contains(r#"model="m2""#) && l.contains("done")),
        "{legs:?}"
    );
}
