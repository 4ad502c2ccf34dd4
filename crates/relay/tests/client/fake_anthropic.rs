//! A fake Anthropic Messages provider for the real Claude Code's gateway run (claude_login.rs),
//! answering by what each request holds rather than from a queue, because an interactive Claude
//! Code sends requests of its own (its quota probe, titles) between the ones a test scripts:
//! a request that offers the `Bash` tool and whose last user turn says [`RUN`] gets a Bash call of
//! [`COMMAND`]; one whose last user turn holds that call's result gets a text quoting it; any other
//! gets "ok". Every request body is recorded.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{Value, json};

/// The word in a prompt that makes the model call Bash.
pub const RUN: &str = "RUN-PROOF";
/// What the model asks Bash to run: the managed settings' variable, which only the settings can set.
pub const COMMAND: &str = "echo proof=$RELAY_PROOF_VAR";
const TOOL_ID: &str = "toolu_proof";

#[derive(Clone, Default)]
struct Shared {
    requests: Arc<Mutex<Vec<Value>>>,
}

pub struct FakeAnthropic {
    pub url: String,
    shared: Shared,
}

/// The text of a message's content, tool results included.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p["type"].as_str() {
                Some("text") => p["text"].as_str().unwrap_or_default().to_owned(),
                Some("tool_result") => text_of(&p["content"]),
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The tool result of the proof call in the last user turn, if that is what it holds.
pub fn proof_result(request: &Value) -> Option<String> {
    let last = request["messages"].as_array()?.last()?;
    let parts = last["content"].as_array()?;
    let result = parts
        .iter()
        .find(|p| p["type"] == "tool_result" && p["tool_use_id"] == TOOL_ID)?;
    Some(text_of(&result["content"]))
}

/// The content blocks and stop reason of the answer to `request`.
fn answer(request: &Value) -> (Vec<Value>, &'static str) {
    if let Some(result) = proof_result(request) {
        let text = format!("The tool said: {}", result.trim());
        return (vec![json!({"type": "text", "text": text})], "end_turn");
    }
    let offers_bash = request["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == "Bash"));
    let asked = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "user" && text_of(&m["content"]).contains(RUN));
    if offers_bash && asked {
        let call = json!({"type": "tool_use", "id": TOOL_ID, "name": "Bash",
            "input": {"command": COMMAND, "description": "Print the proof variable"}});
        return (vec![call], "tool_use");
    }
    (vec![json!({"type": "text", "text": "ok"})], "end_turn")
}

fn sse(blocks: &[Value], stop_reason: &str, input_tokens: u64) -> String {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
        "role": "assistant", "model": "fake", "content": [], "stop_reason": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    );
    for (i, b) in blocks.iter().enumerate() {
        let (start, delta) = if b["type"] == "text" {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": b["text"]}),
            )
        } else {
            (
                json!({"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": b["input"].to_string()}),
            )
        };
        out += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": i, "content_block": start}),
        );
        out += &event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": i, "delta": delta}),
        );
        out += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    out += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 5}}),
    );
    out + &event("message_stop", json!({"type": "message_stop"}))
}

async fn messages(shared: Shared, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(request.clone());
    let (blocks, stop) = answer(&request);
    let input_tokens = 10;
    if request["stream"] == true {
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(sse(&blocks, stop, input_tokens)))
            .unwrap();
    }
    let message = json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
        "content": blocks, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 5}});
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(message.to_string()))
        .unwrap()
}

impl FakeAnthropic {
    pub async fn start() -> Self {
        let shared = Shared::default();
        let state = shared.clone();
        let app = axum::Router::new().route(
            "/v1/messages",
            axum::routing::post(move |body: Bytes| messages(state.clone(), body)),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, shared }
    }

    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }
}
