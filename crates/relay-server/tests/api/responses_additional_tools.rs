//! Codex 0.171 with its default model sends its tools in an `additional_tools` input item (a
//! `functions` namespace holding the freeform tool `exec`) rather than in `tools` (issue 41): an
//! `openai_responses` provider gets the body unchanged; another family gets them as tools,
//! namespaces flattened, and the call comes back as Codex declared it.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent::open_app;
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::responses_replay::{items_done, parse, relay};

fn additional_tools() -> Value {
    json!({"type": "additional_tools", "tools": [
        {"type": "namespace", "name": "functions", "description": "Codex's tools", "tools": [
            {"type": "custom", "name": "exec", "description": "Run a shell command",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
        ]}
    ]})
}

fn codex_request(model: &str) -> Value {
    json!({"model": model, "instructions": "You are Codex.", "stream": true, "store": false,
    "tools": [], "tool_choice": "auto", "parallel_tool_calls": true,
    "input": [
        additional_tools(),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
        // Replayed history repeats the item: the tool is still offered once.
        additional_tools()
    ]})
}

#[tokio::test]
async fn another_family_gets_the_additional_tools_as_functions_and_the_call_maps_back() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push(
        "up-1",
        Reply::Sse {
            chunks: vec![
                up::data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "id": "call_x", "type": "function",
                     "function": {"name": "functions__exec", "arguments": "{\"input\":\"ls -la\"}"}}]}}]})),
                up::finish("tool_calls"),
                up::usage(10, 2),
                up::DONE.into(),
            ],
            pause: Duration::ZERO,
        },
    );
    let res = app
        .post("/v1/responses", None, &codex_request("auto"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.unwrap();
    let sent = fake.requests()[0].clone();
    let tools = sent["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{sent}");
    assert_eq!(tools[0]["function"]["name"], "functions__exec");
    assert_eq!(
        tools[0]["function"]["parameters"]["required"],
        json!(["input"])
    );
    // The item is no message of the conversation.
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user"]);
    let items = items_done(&parse(&text));
    assert_eq!(items[0]["type"], "custom_tool_call", "{text}");
    assert_eq!(items[0]["name"], "exec");
    assert_eq!(items[0]["namespace"], "functions");
    assert_eq!(items[0]["input"], "ls -la");
}

#[tokio::test]
async fn a_responses_provider_gets_the_additional_tools_item_unchanged() {
    let done = json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
        "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}}});
    let body = format!("event: response.completed\ndata: {done}\n\n").into_bytes();
    let (app, seen) = relay(vec![body]).await;
    let req = codex_request("rsp");
    let res = app.post("/v1/responses", None, &req).await;
    assert_eq!(res.status(), StatusCode::OK);
    res.text().await.unwrap();
    let sent: Value = serde_json::from_slice(&seen.lock().unwrap()[0]).unwrap();
    assert_eq!(sent["input"], req["input"]);
    assert_eq!(sent["tools"], json!([]));
}
