//! `POST /v1/responses` (OpenAI's Responses API, what Codex speaks) over real HTTP against the
//! fake upstream: the exact event sequence, tools (parallel, namespace, custom) and their round
//! trips, usage details, quota, notes, typed errors.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent::{auth_app, open_app};
use crate::compat::sse_events;
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::body;

fn sse(chunks: Vec<String>) -> Reply {
    Reply::Sse {
        chunks,
        pause: Duration::ZERO,
    }
}

/// A usage chunk with OpenAI's cached and reasoning token details.
fn detailed_usage() -> String {
    up::data(
        json!({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 8,
        "prompt_tokens_details": {"cached_tokens": 20},
        "completion_tokens_details": {"reasoning_tokens": 5}}}),
    )
}

fn call_chunk(index: u32, id: &str, name: &str, args: &str) -> String {
    up::data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": args}}]}}]}))
}

/// The parsed `(event, data)` pairs of a streamed answer.
fn parse_events(text: &str) -> Vec<(String, Value)> {
    sse_events(text)
        .into_iter()
        .map(|(name, data)| (name, serde_json::from_str(&data).unwrap()))
        .collect()
}

fn types(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

/// What Codex sends, trimmed: developer and user messages, Codex's unused fields.
fn codex_like(stream: bool) -> Value {
    json!({
        "model": "auto", "instructions": "You are Codex.", "stream": stream,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        "tools": [], "tool_choice": "auto", "parallel_tool_calls": true,
        "reasoning": {"summary": "auto"}, "store": false, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "abc", "client_metadata": {"x": "y"}, "service_tier": "auto",
        "text": {"verbosity": "low"}, "truncation": "disabled"
    })
}

#[tokio::test]
async fn streamed_text_has_the_exact_event_sequence_and_usage_details() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push(
        "up-1",
        sse(vec![
            up::reasoning_chunk("Think"),
            up::reasoning_chunk("ing."),
            up::text_chunk("Hel"),
            up::text_chunk("lo"),
            up::finish("stop"),
            detailed_usage(),
            up::DONE.into(),
        ]),
    );
    let r = app.post("/v1/responses", None, &codex_like(true)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    let events = parse_events(&text);
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ],
        "{text}"
    );
    for (i, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], *name);
        assert_eq!(data["sequence_number"], i as u64, "{name}");
    }
    assert_eq!(events[0].1["response"]["status"], "in_progress");
    assert_eq!(events[6].1["text"], "Thinking.");
    assert_eq!(events[10].1["output_index"], 1);
    let message_id = events[9].1["item"]["id"].as_str().unwrap();
    assert!(message_id.starts_with("msg_"));
    assert_eq!(events[11].1["item_id"], message_id);
    assert_eq!(events[13].1["text"], "Hello");
    let done = &events[16].1["response"];
    assert_eq!(done["status"], "completed");
    assert!(done["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(done["model"], "m1");
    assert_eq!(done["output"][0]["type"], "reasoning");
    assert_eq!(done["output"][0]["summary"][0]["text"], "Thinking.");
    assert_eq!(done["output"][1]["content"][0]["text"], "Hello");
    assert_eq!(
        done["usage"],
        json!({"input_tokens": 30, "input_tokens_details": {"cached_tokens": 20},
            "output_tokens": 8, "output_tokens_details": {"reasoning_tokens": 5}, "total_tokens": 38})
    );
    // Instructions and the developer message are the system text, then the user's message.
    let sent = &fake.requests()[0];
    assert_eq!(sent["messages"][0]["role"], "system");
    let system = sent["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("You are Codex.") && system.contains("Be brief."),
        "{system}"
    );
    assert_eq!(
        sent["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
}

#[tokio::test]
async fn parallel_function_calls_keep_their_call_ids_and_round_trip() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push(
        "up-1",
        sse(vec![
            call_chunk(0, "call_a", "read_file", "{\"path\":\"a\"}"),
            call_chunk(1, "call_b", "read_file", "{\"path\":\"b\"}"),
            up::finish("tool_calls"),
            up::usage(40, 9),
            up::DONE.into(),
        ]),
    );
    let mut req = codex_like(false);
    req["tools"] = json!([{"type": "function", "name": "read_file", "strict": true,
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]);
    let r = app.post("/v1/responses", None, &req).await;
    assert_eq!(r.status(), StatusCode::OK);
    let b = body(r).await;
    assert_eq!(
        (b["object"].as_str(), b["status"].as_str()),
        (Some("response"), Some("completed"))
    );
    let calls: Vec<(&str, &str, &str)> = b["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["type"].as_str().unwrap(),
                i["call_id"].as_str().unwrap(),
                i["arguments"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("function_call", "call_a", "{\"path\":\"a\"}"),
            ("function_call", "call_b", "{\"path\":\"b\"}")
        ]
    );
    assert_eq!(b["usage"]["input_tokens"], 40);
    assert_eq!(
        fake.requests()[0]["tools"][0]["function"]["name"],
        "read_file"
    );
    // The next turn: the calls and their outputs (and Codex's reasoning item, dropped).
    let mut next = req.clone();
    let input = next["input"].as_array_mut().unwrap();
    input.push(
        json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
    );
    input.extend(b["output"].as_array().unwrap().iter().cloned());
    input.push(json!({"type": "function_call_output", "call_id": "call_a", "output": "A"}));
    input.push(json!({"type": "function_call_output", "call_id": "call_b", "output": "B"}));
    let r = app.post("/v1/responses", None, &next).await;
    assert_eq!(r.status(), StatusCode::OK, "{}", body(r).await);
    let sent = &fake.requests()[1]["messages"];
    let assistant = &sent[2];
    assert_eq!(assistant["role"], "assistant");
    let ids: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_a", "call_b"]);
    assert_eq!(
        sent[3],
        json!({"role": "tool", "tool_call_id": "call_a", "content": "A"})
    );
    assert_eq!(
        sent[4],
        json!({"role": "tool", "tool_call_id": "call_b", "content": "B"})
    );
}

#[tokio::test]
async fn namespace_and_custom_tools_are_offered_as_functions_and_map_back_exactly() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    let patch = "*** Begin Patch\n*** End Patch";
    fake.push(
        "up-1",
        sse(vec![
            call_chunk(0, "call_n", "mcp_fs__list", "{\"dir\":\".\"}"),
            call_chunk(
                1,
                "call_c",
                "apply_patch",
                &json!({"input": patch}).to_string(),
            ),
            up::finish("tool_calls"),
            up::usage(10, 2),
            up::DONE.into(),
        ]),
    );
    let mut req = codex_like(true);
    req["tools"] = json!([
        {"type": "namespace", "name": "mcp_fs", "description": "files", "tools": [
            {"type": "function", "name": "list", "parameters": {"type": "object", "properties": {"dir": {"type": "string"}}}}]},
        {"type": "custom", "name": "apply_patch", "description": "Patch files",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
        {"type": "web_search"}
    ]);
    let text = app
        .post("/v1/responses", None, &req)
        .await
        .text()
        .await
        .unwrap();
    let first = fake.requests()[0].clone();
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        offered,
        ["mcp_fs__list", "apply_patch"],
        "web_search is left out"
    );
    let custom_schema = &first["tools"][1]["function"]["parameters"];
    assert_eq!(custom_schema["required"], json!(["input"]));
    let events = parse_events(&text);
    let items: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "response.output_item.done")
        .map(|(_, d)| &d["item"])
        .collect();
    assert_eq!(
        (
            items[0]["type"].as_str(),
            items[0]["name"].as_str(),
            items[0]["namespace"].as_str(),
            items[0]["call_id"].as_str()
        ),
        (
            Some("function_call"),
            Some("list"),
            Some("mcp_fs"),
            Some("call_n")
        )
    );
    assert_eq!(
        (
            items[1]["type"].as_str(),
            items[1]["name"].as_str(),
            items[1]["input"].as_str()
        ),
        (Some("custom_tool_call"), Some("apply_patch"), Some(patch))
    );
    let kinds = types(&events);
    assert!(kinds.contains(&"response.custom_tool_call_input.delta"));
    let input_done = events
        .iter()
        .find(|(n, _)| n == "response.custom_tool_call_input.done")
        .unwrap();
    assert_eq!(input_done.1["input"], patch);
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with("response.completed"))
            .count(),
        1
    );
    // Back again: the upstream sees the flattened names and the custom input as its argument.
    let mut next = req.clone();
    let input = next["input"].as_array_mut().unwrap();
    input.extend(items.iter().map(|i| (*i).clone()));
    input.push(json!({"type": "function_call_output", "call_id": "call_n", "output": [{"type": "input_text", "text": "a.rs"}]}));
    input.push(json!({"type": "custom_tool_call_output", "call_id": "call_c", "output": "Done!"}));
    let r = app.post("/v1/responses", None, &next).await;
    assert_eq!(r.status(), StatusCode::OK);
    let sent = &fake.requests()[1]["messages"];
    let calls = &sent[2]["tool_calls"];
    assert_eq!(calls[0]["function"]["name"], "mcp_fs__list");
    assert_eq!(calls[1]["function"]["name"], "apply_patch");
    assert_eq!(
        calls[1]["function"]["arguments"],
        json!({"input": patch}).to_string()
    );
    assert_eq!(sent[3]["content"], "a.rs");
    assert_eq!(sent[4]["content"], "Done!");
}

#[tokio::test]
async fn length_is_incomplete_and_a_failure_mid_stream_is_one_response_failed() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push(
        "up-1",
        sse(vec![
            up::text_chunk("abc"),
            up::finish("length"),
            up::usage(3, 3),
            up::DONE.into(),
        ]),
    );
    let text = app
        .post("/v1/responses", None, &codex_like(true))
        .await
        .text()
        .await
        .unwrap();
    let events = parse_events(&text);
    let (name, last) = events.last().unwrap();
    assert_eq!(name, "response.incomplete");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
    fake.push("up-1", Reply::SseThenCut(vec![up::text_chunk("par")]));
    let text = app
        .post("/v1/responses", None, &codex_like(true))
        .await
        .text()
        .await
        .unwrap();
    let events = parse_events(&text);
    let terminals: Vec<&str> = types(&events)
        .into_iter()
        .filter(|t| {
            [
                "response.completed",
                "response.incomplete",
                "response.failed",
            ]
            .contains(t)
        })
        .collect();
    assert_eq!(terminals, ["response.failed"], "{text}");
    let failed = &events.last().unwrap().1["response"];
    assert_eq!(failed["status"], "failed");
    assert!(failed["error"]["code"].is_string());
}

#[tokio::test]
async fn errors_are_openais_and_quota_notes_and_refunds_are_relays() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 2).await;
    let r = app.post("/v1/responses", None, &codex_like(false)).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(body(r).await["error"]["type"], "authentication_error");
    let token = app.user("codex@example.com").await;
    let image = json!({"model": "auto", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]});
    let continued = json!({"model": "auto", "input": "hi", "previous_response_id": "resp_1"});
    for (bad, field) in [
        (image, "input[0].content[0]"),
        (continued, "previous_response_id"),
    ] {
        let r = app.post("/v1/responses", Some(&token), &bad).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let b = body(r).await;
        assert_eq!(b["error"]["type"], "invalid_request_error");
        assert!(
            b["error"]["message"].as_str().unwrap().contains(field),
            "{b}"
        );
    }
    // Both models fail before any output: 502 and the unit comes back.
    for m in ["up-1", "up-2"] {
        fake.push(
            m,
            Reply::Status {
                status: 500,
                body: json!({}),
                retry_after: None,
            },
        );
    }
    let r = app
        .post("/v1/responses", Some(&token), &codex_like(false))
        .await;
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(
        body(app.me(Some(&token)).await).await["used"],
        0,
        "refunded"
    );
    // 429 upstream everywhere: 429 with Retry-After.
    for m in ["up-1", "up-2"] {
        fake.push(
            m,
            Reply::Status {
                status: 429,
                body: json!({}),
                retry_after: Some(30),
            },
        );
    }
    let r = app
        .post("/v1/responses", Some(&token), &codex_like(false))
        .await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "30");
    assert_eq!(body(r).await["error"]["type"], "rate_limit_error");
    // Notes from the project header, with the receipt; store: true is accepted and stores nothing.
    app.remember(Some(&token), "relay", "Use cargo nextest.")
        .await;
    let mut req = codex_like(false);
    req["store"] = json!(true);
    let r = app
        .client
        .post(app.url("/v1/responses"))
        .bearer_auth(&token)
        .header("x-relay-project", "relay")
        .json(&req)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["x-relay-note-ids"]
            .to_str()
            .unwrap()
            .ends_with("#relay#1")
    );
    let b = body(r).await;
    assert_eq!(b["output"][0]["content"][0]["text"], "ok");
    // The notes are a system message of their own after the client's (issue 32: the client's
    // prefix stays cacheable).
    let sent = fake.requests().last().unwrap()["messages"].clone();
    let system: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(system[0].starts_with("You are Codex."), "{system:?}");
    assert!(
        system
            .iter()
            .skip(1)
            .any(|s| s.contains("Use cargo nextest.")),
        "{system:?}"
    );
    app.post("/v1/responses", Some(&token), &codex_like(false))
        .await;
    let r = app
        .post("/v1/responses", Some(&token), &codex_like(false))
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let b = body(r).await;
    assert_eq!(
        (b["error"]["type"].as_str(), b["error"]["code"].as_str()),
        (Some("permission_error"), Some("quota_exceeded"))
    );
}

#[tokio::test]
async fn codexs_captured_first_request_is_served() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    let mut req: Value =
        serde_json::from_str(include_str!("fixtures/codex-0.169.0-first-request.json")).unwrap();
    req["model"] = json!("auto");
    let r = app.post("/v1/responses", None, &req).await;
    assert_eq!(r.status(), StatusCode::OK);
    let events = parse_events(&r.text().await.unwrap());
    assert_eq!(events.last().unwrap().0, "response.completed");
    let sent = &fake.requests()[0];
    let offered: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"exec_command") && offered.contains(&"multi_agent_v1__spawn_agent"),
        "{offered:?}"
    );
    assert_eq!(
        offered.len(),
        12,
        "the hosted web_search is left out: {offered:?}"
    );
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(
        sent["messages"].as_array().unwrap().len(),
        3,
        "the developer messages are one system text"
    );
}

#[tokio::test]
async fn a_recorded_anthropic_answer_streams_as_responses_events_and_is_counted() {
    let fake = FakeUpstream::start().await;
    let app = crate::compat::app_with_anthropic(
        &fake,
        "anthropic/simonw-llm-anthropic__tools_parallel.0.sse",
    )
    .await;
    let req = json!({"model": "claude", "input": "names", "stream": true,
        "tools": [{"type": "function", "name": "pelican_name_generator", "parameters": {"type": "object", "properties": {}}}]});
    let text = app
        .post("/v1/responses", None, &req)
        .await
        .text()
        .await
        .unwrap();
    let events = parse_events(&text);
    let (name, last) = events.last().unwrap();
    assert_eq!(name, "response.completed", "{text}");
    let calls: Vec<&str> = last["response"]["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(calls.len(), 2, "{text}");
    assert_eq!(calls[0], "toolu_01LtHJmixrs9NcWQkK8hu8hj");
    assert_eq!(last["response"]["usage"]["input_tokens"], 542);
    let metrics = app.get("/metrics", None).await.text().await.unwrap();
    let key = r#"relay_http_requests_total{method="POST",route="/v1/responses",status="200"} 1"#;
    assert!(metrics.contains(key), "{key} missing");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("relay_agent_legs_total") && l.contains(r#"model="claude""#))
    );
}

#[tokio::test]
async fn the_demo_provider_answers_a_responses_call_offline() {
    let app = crate::helpers::TestApp::open().await;
    let req = json!({"model": "auto", "input": "list the files", "tools": [{"type": "function", "name": "list_dir",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]});
    let r = app.post("/v1/responses", None, &req).await;
    assert_eq!(r.status(), StatusCode::OK);
    let b = body(r).await;
    assert_eq!(
        (b["model"].as_str(), b["status"].as_str()),
        (Some("demo"), Some("completed"))
    );
    assert_eq!(
        b["output"].as_array().unwrap().last().unwrap()["type"],
        "function_call",
        "{b}"
    );
}
