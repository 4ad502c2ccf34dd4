//! The compatible endpoints driven by the official Python SDKs (`openai`, `anthropic`) against a
//! relay on port 0 whose provider is the scripted fake upstream. `tests/sdk/compat_sdk.py` makes
//! the calls and prints what the SDK returned; these tests check it.
//!
//! The SDKs live in a virtual environment `.ci/run` creates (`target/sdk-venv`, or the python
//! named by `RELAY_SDK_PYTHON`, which `.ci/run` sets). Without it the tests say so and pass,
//! except under `CI=true` or with `RELAY_SDK_PYTHON` set, where a missing venv fails them.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::agent::{auth_app, open_app};
use crate::compat::app_with_anthropic;
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::TestApp;

pub fn python() -> Option<PathBuf> {
    let named = std::env::var_os("RELAY_SDK_PYTHON").map(PathBuf::from);
    let required = named.is_some() || std::env::var("CI").as_deref() == Ok("true");
    let path = named.unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/sdk-venv/bin/python")
    });
    if path.exists() {
        return Some(path);
    }
    assert!(
        !required,
        "no SDK venv at {} (CI=true or RELAY_SDK_PYTHON set): .ci/run creates it",
        path.display()
    );
    eprintln!(
        "skipped: no SDK venv at {} (.ci/run creates it)",
        path.display()
    );
    None
}

/// Runs one case of the script against `app`; `None` when the venv is absent outside CI.
async fn sdk(app: &TestApp, case: &str, token: Option<&str>) -> Option<Value> {
    let python = python()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/compat_sdk.py");
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

fn two_calls() -> Reply {
    let call = |i: u32, id: &str, path: &str| {
        let arguments = json!({"path": path}).to_string();
        up::data(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": id,
            "type": "function", "function": {"name": "read_file", "arguments": arguments}}]}}]}),
        )
    };
    Reply::Sse {
        chunks: vec![
            call(0, "c1", "a.rs"),
            call(1, "c2", "b.rs"),
            up::finish("tool_calls"),
            up::usage(30, 8),
            up::DONE.into(),
        ],
        pause: Duration::ZERO,
    }
}

#[tokio::test]
async fn openai_sdk_plain_and_streamed_text_with_usage() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push("up-1", up::text_reply(&["Hello", " SDK"]));
    fake.push("up-1", up::text_reply(&["Str", "eamed"]));
    let Some(r) = sdk(&app, "openai_text", None).await else {
        return;
    };
    assert_eq!(r["text"], "Hello SDK");
    assert_eq!(r["finish"], "stop");
    assert_eq!(r["usage"], json!([12, 3, 15]));
    assert_eq!(r["model"], "m1");
    assert_eq!(r["streamed"], "Streamed");
}

#[tokio::test]
async fn openai_sdk_reassembles_streamed_parallel_tool_calls_and_sends_results_back() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push("up-1", two_calls());
    fake.push("up-1", up::text_reply(&["Both read."]));
    let Some(r) = sdk(&app, "openai_tools", None).await else {
        return;
    };
    assert_eq!(
        r["calls"],
        json!([
            ["c1", "read_file", "{\"path\":\"a.rs\"}"],
            ["c2", "read_file", "{\"path\":\"b.rs\"}"]
        ])
    );
    assert_eq!(r["finish"], "tool_calls");
    assert_eq!(r["answer"], "Both read.");
    let sent = &fake.requests()[1]["messages"];
    assert_eq!(sent[2]["tool_call_id"], "c1");
    assert_eq!(
        sent[3],
        json!({"role": "tool", "tool_call_id": "c2", "content": "contents of c2"})
    );
}

#[tokio::test]
async fn anthropic_sdk_text_streamed_tool_use_and_tool_result_round_trip() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    fake.push("up-1", up::text_reply(&["Hi", " there"]));
    fake.push("up-1", two_calls());
    fake.push("up-1", up::text_reply(&["Done."]));
    let Some(r) = sdk(&app, "anthropic_all", None).await else {
        return;
    };
    assert_eq!(
        (r["text"].as_str(), r["stop"].as_str()),
        (Some("Hi there"), Some("end_turn"))
    );
    assert_eq!(r["usage"], json!([12, 3]));
    assert_eq!(
        r["tool_uses"],
        json!([["c1", "read_file", {"path": "a.rs"}], ["c2", "read_file", {"path": "b.rs"}]])
    );
    assert_eq!(r["stream_stop"], "tool_use");
    assert_eq!(r["stream_usage"], json!([30, 8]));
    assert_eq!(r["answer"], "Done.");
    let sent = &fake.requests()[2]["messages"];
    assert_eq!(sent[0], json!({"role": "system", "content": "Sys."}));
    assert_eq!(
        sent[3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "ok"})
    );
}

#[tokio::test]
async fn sdk_exceptions_are_typed_for_401_400_and_403_quota() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 1).await;
    let token = app.user("sdk@example.com").await;
    let Some(r) = sdk(&app, "errors", Some(&token)).await else {
        return;
    };
    assert_eq!(
        r,
        json!({
            "openai_401": ["AuthenticationError", 401],
            "openai_400": ["BadRequestError", 400],
            "anthropic_401": ["AuthenticationError", 401],
            "anthropic_400": ["BadRequestError", 400],
            "openai_ok": "ok",
            "openai_403": ["PermissionDeniedError", 403],
            // A reached cap on the Messages door is Claude Code's usage-limit answer (issue 40):
            // 429 `billing_error`, which the SDK does not retry (`x-should-retry: false`).
            "anthropic_429_billing": ["RateLimitError", 429],
        })
    );
}

#[tokio::test]
async fn sdk_rate_limit_errors_carry_retry_after() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    for _ in 0..2 {
        for m in ["up-1", "up-2"] {
            fake.push(
                m,
                Reply::Status {
                    status: 429,
                    body: json!({}),
                    retry_after: Some(7),
                },
            );
        }
    }
    let Some(r) = sdk(&app, "rate_limited", None).await else {
        return;
    };
    assert_eq!(
        r,
        json!({"openai": ["RateLimitError", "7"], "anthropic": ["RateLimitError", "7"]})
    );
}

#[tokio::test]
async fn sdk_calls_with_the_project_header_get_the_notes_and_the_receipt() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    app.remember(None, "sdkproj", "Run cargo test before pushing.")
        .await;
    let Some(r) = sdk(&app, "notes", None).await else {
        return;
    };
    assert_eq!(r["openai"], "mem#local#sdkproj#1");
    assert_eq!(r["anthropic"], "mem#local#sdkproj#1");
    assert_eq!(r["text"], "ok");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    for request in requests {
        let system = request["messages"][0]["content"].as_str().unwrap();
        assert!(
            system.contains("Run cargo test before pushing."),
            "{system}"
        );
    }
}

#[tokio::test]
async fn openai_sdk_call_answered_by_an_anthropic_recording() {
    let fake = FakeUpstream::start().await;
    let app = app_with_anthropic(
        &fake,
        "anthropic/simonw-llm-anthropic__tools_parallel.0.sse",
    )
    .await;
    let Some(r) = sdk(&app, "cross", None).await else {
        return;
    };
    assert_eq!(
        (r["model"].as_str(), r["finish"].as_str()),
        (Some("claude"), Some("tool_calls"))
    );
    assert_eq!(r["calls"].as_array().unwrap().len(), 2);
    assert_eq!(r["calls"][0][0], "toolu_01LtHJmixrs9NcWQkK8hu8hj");
    assert_eq!(r["calls"][0][1], "pelican_name_generator");
    assert_eq!(r["models"], json!(["auto", "m1", "m2", "claude"]));
}

#[tokio::test]
async fn anthropic_sdk_lists_models_with_its_api_key() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 5).await;
    let token = app.user("models@example.com").await;
    let Some(r) = sdk(&app, "anthropic_models", Some(&token)).await else {
        return;
    };
    assert_eq!(r["ids"], json!(["auto", "m1", "m2"]));
    assert_eq!(r["types"], json!(["model"]));
    assert_eq!(r["bad_key"], json!(["AuthenticationError", 401]));
}
