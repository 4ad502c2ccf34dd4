//! Tool calls a provider gets wrong (issue 31, point 4): a dotted name, arguments that are not
//! JSON, two calls with one id, an empty id. Whatever a leg emits, the client's next leg carrying
//! those calls and their results is accepted, on `/v1/agent/stream`, `/v1/chat/completions` and
//! `/v1/messages` alike.

use std::collections::HashSet;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};

use crate::agent::{assert_one_terminal, with_fake};
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::{TestApp, body, open_config};

/// One streamed answer holding `calls` (`id`, `name`, `arguments`), ending with `tool_calls`.
fn calls_reply(calls: &[(&str, &str, &str)]) -> Reply {
    let deltas: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name, args))| {
            json!({"index": i, "id": id, "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    Reply::Sse {
        chunks: vec![
            up::data(json!({"choices": [{"index": 0, "delta": {"tool_calls": deltas}}]})),
            up::finish("tool_calls"),
            up::usage(20, 5),
            up::DONE.to_owned(),
        ],
        pause: Duration::ZERO,
    }
}

/// The malformed cases: the model each goes to and, on the OpenAI-shaped fake, what it streams
/// (`m-anthropic` is the Anthropic-shaped upstream, which sends two blocks with one id), and
/// how many calls come out.
fn cases() -> Vec<(&'static str, &'static str, Option<Reply>, usize)> {
    vec![
        (
            "dotted name",
            "m1",
            Some(calls_reply(&[(
                "c1",
                "functions.read_file",
                r#"{"path":"a.txt"}"#,
            )])),
            1,
        ),
        (
            "arguments not JSON",
            "m1",
            Some(calls_reply(&[(
                "c1",
                "read_file",
                r#"{"path":"a.txt"} trailing"#,
            )])),
            1,
        ),
        ("one id twice", "m-anthropic", None, 2),
        (
            "empty id",
            "m1",
            Some(calls_reply(&[("", "read_file", r#"{"path":"a.txt"}"#)])),
            1,
        ),
    ]
}

/// An Anthropic-shaped upstream: two `tool_use` blocks with the id `dup`, or, once the history
/// holds tool results, a text answer.
async fn anthropic_upstream() -> String {
    let event = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
    let start = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
               "role": "assistant", "model": "x", "content": [],
               "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    let end = |reason: &str| {
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": reason},
                   "usage": {"output_tokens": 5}}),
        ) + &event("message_stop", json!({"type": "message_stop"}))
    };
    let mut calls = start.clone();
    for (i, path) in ["a.txt", "b.txt"].iter().enumerate() {
        calls += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": i, "content_block":
                   {"type": "tool_use", "id": "dup", "name": "read_file", "input": {}}}),
        );
        calls += &event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": i, "delta":
                   {"type": "input_json_delta", "partial_json": format!("{{\"path\":\"{path}\"}}")}}),
        );
        calls += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    calls += &end("tool_use");
    let text = start
        + &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        )
        + &event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "sorry"}}),
        )
        + &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        )
        + &end("end_turn");
    let app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move |request: axum::body::Bytes| {
            let answered = String::from_utf8_lossy(&request).contains("tool_result");
            let body = if answered {
                text.clone()
            } else {
                calls.clone()
            };
            async move {
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(body))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// The OpenAI-shaped fake's models, and `m-anthropic` on the Anthropic-shaped upstream.
async fn app_of(fake: &FakeUpstream) -> TestApp {
    let anthropic = anthropic_upstream().await;
    TestApp::spawn_with(|dir| {
        let mut c = with_fake(open_config(dir), fake);
        c.providers.push(ProviderConfig {
            base_url: Some(anthropic),
            ..ProviderConfig::new("anth", ProviderKind::Anthropic)
        });
        c.models.push(ModelConfig {
            name: "m-anthropic".into(),
            provider: "anth".into(),
            upstream: "claude-x".into(),
            ..Default::default()
        });
        c.limits.agent_burst = 1_000;
        c
    })
    .await
}

/// Checks what any door emitted: valid names, JSON arguments, distinct non-empty ids.
fn assert_acceptable(case: &str, calls: &[(String, String, String)]) {
    let ids: HashSet<&str> = calls.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(ids.len(), calls.len(), "{case}: ids are distinct");
    for (id, name, arguments) in calls {
        assert!(!id.is_empty(), "{case}");
        assert_eq!(name, "read_file", "{case}");
        let args: Value = serde_json::from_str(arguments).expect("JSON arguments");
        assert!(args.is_object(), "{case}: {args}");
    }
}

const READ_FILE: &str = "read_file";

fn tool_def() -> Value {
    json!({"name": READ_FILE, "description": "Reads a file",
           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}})
}

#[tokio::test]
async fn malformed_calls_come_back_accepted_on_the_native_route() {
    let fake = FakeUpstream::start().await;
    let app = app_of(&fake).await;
    for (case, model, reply, count) in cases() {
        if let Some(reply) = reply {
            fake.push("up-1", reply);
        }
        let first = json!({"model": model, "messages": [{"role": "user", "content": "read"}],
                           "tools": [tool_def()]});
        let (code, lines) = app.leg(None, &first).await;
        assert_eq!(code, StatusCode::OK, "{case}");
        let last = assert_one_terminal(&lines);
        assert_eq!(last["event"], "tool_calls", "{case}: {last}");
        let emitted: Vec<(String, String, String)> = last["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap().to_owned();
                (s("id"), s("name"), s("arguments"))
            })
            .collect();
        assert_eq!(emitted.len(), count, "{case}");
        assert_acceptable(case, &emitted);
        if case == "arguments not JSON" {
            let args: Value = serde_json::from_str(&emitted[0].2).unwrap();
            assert_eq!(args["_raw"], r#"{"path":"a.txt"} trailing"#);
        }
        let mut messages = vec![
            json!({"role": "user", "content": "read"}),
            json!({"role": "assistant", "content": null, "tool_calls": emitted.iter().map(|(id, name, args)|
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            ).collect::<Vec<_>>()}),
        ];
        for (id, _, _) in &emitted {
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": "no such file"}));
        }
        if model == "m1" {
            fake.push("up-1", up::text_reply(&["sorry"]));
        }
        let next = json!({"model": model, "messages": messages, "tools": [tool_def()]});
        let (code, lines) = app.leg(None, &next).await;
        assert_eq!(code, StatusCode::OK, "{case}: {lines:?}");
        assert_eq!(assert_one_terminal(&lines)["event"], "done", "{case}");
    }
}

#[tokio::test]
async fn malformed_calls_come_back_accepted_on_chat_completions() {
    let fake = FakeUpstream::start().await;
    let app = app_of(&fake).await;
    let tools = json!([{"type": "function", "function": tool_def()}]);
    for (case, model, reply, count) in cases() {
        if let Some(reply) = reply {
            fake.push("up-1", reply);
        }
        let user = json!({"role": "user", "content": "read"});
        let r = app
            .post(
                "/v1/chat/completions",
                None,
                &json!({"model": model, "messages": [user], "tools": tools}),
            )
            .await;
        assert_eq!(r.status(), StatusCode::OK, "{case}");
        let b = body(r).await;
        let message = b["choices"][0]["message"].clone();
        let emitted: Vec<(String, String, String)> = message["tool_calls"]
            .as_array()
            .unwrap_or_else(|| panic!("{case}: {b}"))
            .iter()
            .map(|c| {
                let s = |v: &Value| v.as_str().unwrap().to_owned();
                (
                    s(&c["id"]),
                    s(&c["function"]["name"]),
                    s(&c["function"]["arguments"]),
                )
            })
            .collect();
        assert_eq!(emitted.len(), count, "{case}");
        assert_acceptable(case, &emitted);
        let mut messages = vec![user, message];
        for (id, _, _) in &emitted {
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": "no such file"}));
        }
        if model == "m1" {
            fake.push("up-1", up::text_reply(&["sorry"]));
        }
        let r = app
            .post(
                "/v1/chat/completions",
                None,
                &json!({"model": model, "messages": messages, "tools": tools}),
            )
            .await;
        assert_eq!(r.status(), StatusCode::OK, "{case}");
        assert_eq!(body(r).await["choices"][0]["message"]["content"], "sorry");
    }
}

async fn messages_call(app: &TestApp, request: &Value) -> (StatusCode, Value) {
    let r = reqwest::Client::new()
        .post(app.url("/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .json(request)
        .send()
        .await
        .unwrap();
    (r.status(), body(r).await)
}

#[tokio::test]
async fn malformed_calls_come_back_accepted_on_messages() {
    let fake = FakeUpstream::start().await;
    let app = app_of(&fake).await;
    let tools = json!([{"name": READ_FILE, "description": "Reads a file",
                        "input_schema": tool_def()["parameters"]}]);
    for (case, model, reply, count) in cases() {
        if let Some(reply) = reply {
            fake.push("up-1", reply);
        }
        let user = json!({"role": "user", "content": "read"});
        let (code, b) = messages_call(
            &app,
            &json!({"model": model, "max_tokens": 64, "messages": [user], "tools": tools}),
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{case}: {b}");
        let blocks: Vec<Value> = b["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["type"] == "tool_use")
            .cloned()
            .collect();
        let emitted: Vec<(String, String, String)> = blocks
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap().to_owned(),
                    c["name"].as_str().unwrap().to_owned(),
                    c["input"].to_string(),
                )
            })
            .collect();
        assert_eq!(emitted.len(), count, "{case}: {b}");
        assert_acceptable(case, &emitted);
        let results: Vec<Value> = emitted
            .iter()
            .map(|(id, _, _)| json!({"type": "tool_result", "tool_use_id": id, "content": "no such file"}))
            .collect();
        if model == "m1" {
            fake.push("up-1", up::text_reply(&["sorry"]));
        }
        let (code, b) = messages_call(
            &app,
            &json!({"model": model, "max_tokens": 64, "tools": tools, "messages": [
                user,
                {"role": "assistant", "content": blocks},
                {"role": "user", "content": results},
            ]}),
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{case}: {b}");
        assert_eq!(b["content"][0]["text"], "sorry", "{case}");
    }
}
