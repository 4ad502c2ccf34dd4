//! The door rows (issue 39): a Claude Code-sized `POST /v1/messages`, one call at a time, straight
//! to an Anthropic-style mock, through the bare proxy (`floor`, forwarding the same bytes both
//! ways) and through Relay to an `anthropic` provider (same family) and to an `openai` one
//! (translated), in the same run: latency to the last byte and the proxy's CPU per call.
//!
//! The body is Claude Code 2.1.332's real first request (`fixtures/`, recorded from `claude -p`
//! against a capturing server; paths and ids replaced), 87 KB, grown to the sizes a long session
//! reaches with tool_use/tool_result turns (a `Read` of a source file and its content).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use crate::procfs;

/// Claude Code's first request, as recorded.
const FIRST_REQUEST: &str = include_str!("../fixtures/claude-code-2.1.332-first-request.json");

/// The Relay model names the door rows use: one on the anthropic mock, one on the openai mock.
pub const SAME_FAMILY_MODEL: &str = "bench-claude";
pub const TRANSLATED_MODEL: &str = "bench-claude-openai";

/// The mock's answer to `POST /v1/messages`: a short Anthropic stream with usage.
const MESSAGES_ANSWER: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":21000,\"cache_read_input_tokens\":0,\"cache_creation_input_tokens\":0,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"I'll read the file\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" and fix the test.\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

/// The mock's `POST /v1/messages` handler: the stream above, whatever the body.
pub async fn messages_answer(_body: Bytes) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        MESSAGES_ANSWER,
    )
        .into_response()
}

/// Claude Code's first request for `model`, grown with tool turns to at least `size` bytes
/// (the recorded size when `size` is smaller).
pub fn claude_code_body(model: &str, size: usize) -> Result<Vec<u8>> {
    let mut request: Value = serde_json::from_str(FIRST_REQUEST)?;
    request["model"] = json!(model);
    let mut turn = 0;
    loop {
        let bytes = serde_json::to_vec(&request)?;
        if bytes.len() >= size {
            return Ok(bytes);
        }
        turn += 1;
        let id = format!("toolu_bench_{turn:04}");
        let messages = request["messages"]
            .as_array_mut()
            .context("the recorded request has messages")?;
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Reading src/module_{turn}.rs to see how the retry is wired.")},
            {"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": format!("/home/dev/project/src/module_{turn}.rs")}}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": source_file(turn)}
        ]}));
    }
}

/// About 8 KB of numbered source lines, as `Read` returns them.
fn source_file(turn: usize) -> String {
    (1..=120)
        .map(|n| {
            format!(
                "{n:>6}\u{2192}    let attempt_{turn}_{n} = retry(&client, request.clone(), Backoff::jittered({n}));\n"
            )
        })
        .collect()
}

/// The last event of a whole Anthropic stream, as every path answers it.
const DONE: &str = "message_stop";

/// One path's latencies at concurrency 1 and the CPU its proxy spent per call.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Path {
    pub calls: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// CPU of the proxy's process per call (none for the direct path).
    pub cpu_ms_per_call: Option<f64>,
}

/// One body size: straight to the mock, through the bare proxy, through Relay.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DoorRow {
    /// What Relay's provider is: `same family` or `translated (openai)`.
    pub kind: String,
    pub body_bytes: usize,
    pub direct: Path,
    pub floor: Path,
    pub relay: Path,
}

impl DoorRow {
    /// Relay's added latency (Relay − direct): (p50, p99).
    pub fn added(&self) -> (f64, f64) {
        (
            self.relay.p50_ms - self.direct.p50_ms,
            self.relay.p99_ms - self.direct.p99_ms,
        )
    }

    /// The bare proxy's added latency.
    pub fn floor_added(&self) -> (f64, f64) {
        (
            self.floor.p50_ms - self.direct.p50_ms,
            self.floor.p99_ms - self.direct.p99_ms,
        )
    }

    /// Relay's CPU per call ÷ the bare proxy's.
    pub fn cpu_ratio(&self) -> f64 {
        self.relay.cpu_ms_per_call.unwrap_or(f64::NAN)
            / self.floor.cpu_ms_per_call.unwrap_or(f64::NAN)
    }
}

/// Where one path sends its calls.
pub struct Endpoint<'a> {
    pub url: String,
    pub headers: Vec<(&'a str, String)>,
    /// The process whose CPU is counted.
    pub pid: Option<u32>,
}

/// Calls `endpoint` with `body` one at a time for `duration` (after `warm` unmeasured calls);
/// each answer must be a whole stream (its `done` marker present).
pub async fn measure_path(
    http: &reqwest::Client,
    endpoint: &Endpoint<'_>,
    body: &[u8],
    done: &str,
    warm: usize,
    duration: Duration,
) -> Result<Path> {
    let body = Bytes::copy_from_slice(body);
    let call = || async {
        let mut request = http
            .post(&endpoint.url)
            .header("content-type", "application/json")
            .body(body.clone());
        for (name, value) in &endpoint.headers {
            request = request.header(*name, value);
        }
        let response = request.send().await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() || !text.contains(done) {
            bail!(
                "{} answered {status}: {}",
                endpoint.url,
                text.chars().take(300).collect::<String>()
            );
        }
        Ok(())
    };
    for _ in 0..warm {
        call().await?;
    }
    let ticks = endpoint.pid.map(procfs::tree_cpu_ticks);
    let started = Instant::now();
    let mut times = Vec::new();
    while started.elapsed() < duration || times.len() < 10 {
        let t = Instant::now();
        call().await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let cpu = match (endpoint.pid, ticks) {
        (Some(pid), Some(before)) => {
            #[allow(clippy::cast_precision_loss, reason = "ticks and calls are small")]
            let ms = (procfs::tree_cpu_ticks(pid).saturating_sub(before)) as f64 * 1000.0
                / procfs::clk_tck()
                / times.len() as f64;
            Some(ms)
        }
        _ => None,
    };
    let (p50, _, p99, _) = crate::load::summarize(&mut times);
    Ok(Path {
        calls: times.len(),
        p50_ms: p50,
        p99_ms: p99,
        cpu_ms_per_call: cpu,
    })
}

/// Every path of one row, alternating in short rounds so that a load spike on the shared
/// machine falls on all three alike.
pub async fn measure_row(
    http: &reqwest::Client,
    kind: &str,
    body: &[u8],
    paths: [&Endpoint<'_>; 3],
    rounds: usize,
    per_round: Duration,
) -> Result<DoorRow> {
    let mut merged: [Vec<Path>; 3] = Default::default();
    for round in 0..rounds {
        for (i, endpoint) in paths.iter().enumerate() {
            let warm = if round == 0 { 5 } else { 1 };
            merged[i].push(measure_path(http, endpoint, body, DONE, warm, per_round).await?);
        }
    }
    let [direct, floor, relay] = merged.map(|p| combine(&p));
    ensure!(relay.calls > 0, "no call through Relay");
    Ok(DoorRow {
        kind: kind.to_owned(),
        body_bytes: body.len(),
        direct,
        floor,
        relay,
    })
}

/// Rounds of one path as one: percentiles weighted by calls (the median of the rounds' figures,
/// which on a shared machine is steadier than pooling), CPU over all calls.
pub fn combine(rounds: &[Path]) -> Path {
    let calls: usize = rounds.iter().map(|r| r.calls).sum();
    let median = |f: fn(&Path) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    #[allow(clippy::cast_precision_loss, reason = "call counts are small")]
    let cpu = rounds
        .iter()
        .map(|r| r.cpu_ms_per_call.map(|c| c * r.calls as f64))
        .sum::<Option<f64>>()
        .map(|total| total / calls.max(1) as f64);
    Path {
        calls,
        p50_ms: median(|p| p.p50_ms),
        p99_ms: median(|p| p.p99_ms),
        cpu_ms_per_call: cpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_grows_with_whole_tool_turns_and_ends_on_the_users_turn() {
        let first = claude_code_body("m", 0).unwrap();
        assert!(first.len() > 80_000, "{}", first.len());
        let grown = claude_code_body("m", 300_000).unwrap();
        assert!(grown.len() >= 300_000 && grown.len() < 320_000);
        let request: Value = serde_json::from_slice(&grown).unwrap();
        assert_eq!(request["model"], "m");
        let messages = request["messages"].as_array().unwrap();
        assert_eq!(messages.last().unwrap()["role"], "user");
        let blocks: Vec<Value> = messages
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .collect();
        let ids = |kind: &str, field: &str| -> Vec<String> {
            blocks
                .iter()
                .filter(|b| b["type"] == kind)
                .map(|b| b[field].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        // Whole turns: every call the body adds has its result, and there are many of them
        // (about 10 KB each from 87 KB to 300 KB).
        let uses = ids("tool_use", "id");
        assert!(uses.len() >= 15, "{}", uses.len());
        assert_eq!(uses, ids("tool_result", "tool_use_id"));
    }
}
