//! The provider adapters against recorded provider streams (`tests/fixtures`).
//!
//! Every fixture an adapter should understand is replayed through the SSE driver and compared
//! with a table written by reading the fixture (text, reasoning, tool calls, usage, finish)
//! (`cases`). Every raw SSE fixture is then re-split at every byte (`resplit`), behaviour no
//! fixture shows is driven by hand (`behaviour`, with the demo provider), and each adapter is run
//! over real HTTP against a fake upstream that serves the recorded bytes (`http`). The Responses
//! API adapter has its own table and checks (`responses`). This file holds
//! what they share: reading fixtures and driving bytes through an adapter's normaliser.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod behaviour;
mod cases;
mod http;
mod plain_http;
mod resplit;
mod responses;

use std::convert::Infallible;
use std::path::PathBuf;

use bytes::Bytes;
use futures::StreamExt;
use relay_server::providers::anthropic;
use relay_server::providers::gemini;
use relay_server::providers::openai;
use relay_server::providers::{
    EventStream, FinishReason, ProviderError, ProviderEvent, ToolCall, Usage, sse,
};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Reading fixtures

fn fixtures_dir() -> PathBuf {
    std::env::var_os("RELAY_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"))
}

fn fixture(file: &str) -> Vec<u8> {
    let path = fixtures_dir().join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Adapter {
    OpenAi,
    Anthropic,
    Gemini,
}

/// A fixture as the bytes of an SSE body. `.chunks.txt` files hold one data payload per line
/// with the framing stripped; they are framed again, one event per line, and for Anthropic the
/// payload's `type` becomes the event name as the real API sends it.
fn sse_body(file: &str, adapter: Adapter) -> Vec<u8> {
    let raw = fixture(file);
    if !file.ends_with(".chunks.txt") {
        return raw;
    }
    let text = String::from_utf8(raw).expect("chunks files are UTF-8");
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if adapter == Adapter::Anthropic {
            let value: Value = serde_json::from_str(line).expect("a chunk line is JSON");
            out.push_str(&format!(
                "event: {}\n",
                value["type"].as_str().expect("type")
            ));
        }
        out.push_str(&format!("data: {line}\n\n"));
    }
    out.into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Driving bytes through an adapter's normaliser

/// The outcome of one stream: what a caller would show and how it ended.
#[derive(Debug, PartialEq)]
struct Outcome {
    text: String,
    reasoning: String,
    end: Result<(FinishReason, Vec<ToolCall>, Usage), ProviderError>,
}

fn drive(adapter: Adapter, chunks: Vec<Bytes>) -> EventStream {
    let bytes = futures::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
    match adapter {
        Adapter::OpenAi => sse::drive(bytes, openai::Normaliser::new()),
        Adapter::Anthropic => sse::drive(bytes, anthropic::Normaliser::new()),
        Adapter::Gemini => sse::drive(bytes, gemini::Normaliser::new()),
    }
}

fn events(adapter: Adapter, chunks: Vec<Bytes>) -> Vec<Result<ProviderEvent, ProviderError>> {
    futures::executor::block_on(drive(adapter, chunks).collect())
}

/// Sums a stream's items up, checking the stream's own rule on the way: exactly one terminal
/// item (`Finished` or an error), and it is the last.
fn outcome(items: &[Result<ProviderEvent, ProviderError>]) -> Outcome {
    let (last, body) = items
        .split_last()
        .expect("a stream yields at least its terminal item");
    let mut text = String::new();
    let mut reasoning = String::new();
    for item in body {
        match item {
            Ok(ProviderEvent::Text(t)) => text.push_str(t),
            Ok(ProviderEvent::Reasoning(r)) => reasoning.push_str(r),
            // A thinking block's signature or encrypted form: carried, not shown.
            Ok(
                ProviderEvent::ReasoningSignature(_)
                | ProviderEvent::RedactedReasoning(_)
                | ProviderEvent::ReasoningItem(_)
                // An early count (Anthropic's `message_start`) before the finish.
                | ProviderEvent::UsageSoFar(_),
            ) => {}
            other => panic!("a terminal item before the end: {other:?}"),
        }
    }
    let end = match last.clone() {
        Ok(ProviderEvent::Finished {
            finish_reason,
            tool_calls,
            usage,
        }) => Ok((finish_reason, tool_calls, usage)),
        Ok(other) => panic!("the stream ended without a terminal item (last: {other:?})"),
        Err(err) => Err(err),
    };
    Outcome {
        text,
        reasoning,
        end,
    }
}

async fn outcome_of(stream: EventStream) -> Outcome {
    outcome(&stream.collect::<Vec<_>>().await)
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}
