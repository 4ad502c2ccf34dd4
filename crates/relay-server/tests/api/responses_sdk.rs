//! `POST /v1/responses` driven by the official openai Python SDK (`client.responses.create` and
//! `.stream`) against a relay on port 0 whose provider is the scripted fake; the venv is the one
//! `compat_sdk.rs` uses (absent outside CI: the tests say so and pass).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::{auth_app, open_app};
use crate::compat_sdk::python;
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::TestApp;

async fn sdk(app: &TestApp, case: &str, token: Option<&str>) -> Option<Value> {
    let python = python()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/responses_sdk.py");
    let mut command = std::process::Command::new(python);
    command
        .arg(script)
        .arg(case)
        .env("RELAY_URL", format!("http://{}", app.addr));
    if let Some(t) = token {
        command.env("RELAY_TOKEN", t);
    }
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "{case}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

#[tokio::test]
async fn openai_sdk_responses_text_streamed_events_and_usage() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    let usage = up::data(
        json!({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 8,
        "prompt_tokens_details": {"cached_tokens": 20}, "completion_tokens_details": {"reasoning_tokens": 5}}}),
    );
    fake.push(
        "up-1",
        Reply::Sse {
            chunks: vec![
                up::text_chunk("Hello"),
                up::text_chunk(" SDK"),
                up::finish("stop"),
                usage,
                up::DONE.into(),
            ],
            pause: Duration::ZERO,
        },
    );
    fake.push("up-1", up::text_reply(&["Str", "eamed"]));
    let Some(r) = sdk(&app, "text", None).await else {
        return;
    };
    assert_eq!(
        (
            r["text"].as_str(),
            r["status"].as_str(),
            r["model"].as_str()
        ),
        (Some("Hello SDK"), Some("completed"), Some("m1"))
    );
    assert_eq!(r["usage"], json!([30, 20, 8, 5, 38]));
    assert_eq!(
        (r["streamed"].as_str(), r["stream_status"].as_str()),
        (Some("Streamed"), Some("completed"))
    );
    let events = r["events"].as_array().unwrap();
    let types: Vec<&str> = events.iter().map(|e| e[0].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"response.created"));
    assert_eq!(types.last(), Some(&"response.completed"));
    assert_eq!(
        types
            .iter()
            .filter(|t| **t == "response.output_text.delta")
            .count(),
        2
    );
    let numbers: Vec<u64> = events.iter().map(|e| e[1].as_u64().unwrap()).collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn openai_sdk_responses_parallel_function_calls_round_trip() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    let call = |i: u32, id: &str, path: &str| {
        up::data(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": id,
            "type": "function", "function": {"name": "read_file", "arguments": json!({"path": path}).to_string()}}]}}]}),
        )
    };
    fake.push(
        "up-1",
        Reply::Sse {
            chunks: vec![
                call(0, "c1", "a.rs"),
                call(1, "c2", "b.rs"),
                up::finish("tool_calls"),
                up::usage(30, 8),
                up::DONE.into(),
            ],
            pause: Duration::ZERO,
        },
    );
    fake.push("up-1", up::text_reply(&["Both read."]));
    let Some(r) = sdk(&app, "tools", None).await else {
        return;
    };
    assert_eq!(
        r["calls"],
        json!([
            ["c1", "read_file", "{\"path\":\"a.rs\"}"],
            ["c2", "read_file", "{\"path\":\"b.rs\"}"]
        ])
    );
    assert_eq!(
        r["deltas"],
        json!(["{\"path\":\"a.rs\"}", "{\"path\":\"b.rs\"}"])
    );
    assert_eq!(r["answer"], "Both read.");
    let sent = &fake.requests()[1]["messages"];
    assert_eq!(sent[1]["tool_calls"][1]["id"], "c2");
    assert_eq!(
        sent[2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "contents of c1"})
    );
}

#[tokio::test]
async fn openai_sdk_responses_errors_are_typed() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 1).await;
    let token = app.user("sdk-responses@example.com").await;
    let Some(r) = sdk(&app, "errors", Some(&token)).await else {
        return;
    };
    assert_eq!(
        r,
        json!({
            "401": ["AuthenticationError", 401],
            "400": ["BadRequestError", 400],
            "ok": "ok",
            "403": ["PermissionDeniedError", 403],
        })
    );
}
