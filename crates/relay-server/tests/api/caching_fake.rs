//! Upstreams that cache prompt prefixes as the providers document it, to measure what share of
//! the prompt a client gets from the cache directly and through Relay.
//!
//! Tokens are 4 bytes of each prompt element's JSON (without its `cache_control`).
//! Anthropic style (`/v1/messages`): the prompt is tools, then system blocks, then message
//! blocks; a `cache_control` marker ends a cacheable prefix (more than 4 markers is a 400); a
//! marker reads the longest prefix cached at it or at one of the 20 blocks before it, and writes
//! the prefix up to it; prefixes under 1,024 tokens are not cached. `input_tokens` excludes the
//! tokens read and written, as Anthropic reports. OpenAI style (`/chat/completions`): automatic,
//! prefixes of 1,024 tokens and more, in 128-token steps; `prompt_tokens` counts all.
//! Every request's thinking blocks must carry a signature this upstream issued.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const MIN_TOKENS: u64 = 1024;
const LOOKBACK: usize = 20;

#[derive(Default)]
struct State {
    /// Prefix hashes cached (Anthropic: at breakpoints; OpenAI: at 128-token steps).
    cached: HashSet<[u8; 32]>,
    /// Signatures handed out with thinking blocks.
    signatures: HashSet<String>,
    /// (prompt tokens, read from cache, written to cache) per request.
    counts: Vec<(u64, u64, u64)>,
    bodies: Vec<Value>,
    headers: Vec<HeaderMap>,
    /// The thinking stream to answer with (a recorded Anthropic stream), when asked for thinking.
    thinking_sse: Option<String>,
}

#[derive(Clone)]
pub struct CachingUpstream {
    pub url: String,
    state: Arc<Mutex<State>>,
}

fn tokens(v: &Value) -> u64 {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("cache_control");
    }
    (serde_json::to_vec(&v).unwrap().len() as u64).div_ceil(4)
}

fn marked(v: &Value) -> bool {
    v.get("cache_control").is_some_and(|c| !c.is_null())
}

/// The prompt as blocks: (its JSON without markers, tokens, marked).
fn anthropic_blocks(body: &Value) -> Vec<(Value, u64, bool)> {
    let mut out = Vec::new();
    let mut push = |v: &Value, prefix: Value| {
        let mut clean = v.clone();
        if let Some(o) = clean.as_object_mut() {
            o.remove("cache_control");
        }
        out.push((json!([prefix, clean]), tokens(v), marked(v)));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push(t, json!("tool"));
    }
    match &body["system"] {
        Value::String(s) => push(&json!({"type": "text", "text": s}), json!("system")),
        Value::Array(blocks) => blocks.iter().for_each(|b| push(b, json!("system"))),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        match &m["content"] {
            Value::String(s) => push(&json!({"type": "text", "text": s}), m["role"].clone()),
            Value::Array(blocks) => blocks.iter().for_each(|b| push(b, m["role"].clone())),
            _ => {}
        }
    }
    out
}

impl CachingUpstream {
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
                let s = s.clone();
                async move {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let mut st = s.lock().unwrap();
                    st.bodies.push(body.clone());
                    st.headers.push(headers);
                    if uri.path().ends_with("/v1/messages") {
                        anthropic(&mut st, &body)
                    } else {
                        openai(&mut st, &body)
                    }
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url: format!("http://{addr}"),
            state,
        }
    }

    /// Answers requests with `thinking` with this recorded stream.
    pub fn think_with(&self, sse: String) {
        self.state.lock().unwrap().thinking_sse = Some(sse);
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.state.lock().unwrap().bodies.clone()
    }

    pub fn header(&self, i: usize, name: &str) -> Option<String> {
        let st = self.state.lock().unwrap();
        st.headers[i]
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    }

    pub fn counts(&self) -> Vec<(u64, u64, u64)> {
        self.state.lock().unwrap().counts.clone()
    }

    /// The share of all prompt tokens so far that were read from the cache.
    pub fn cache_share(&self) -> f64 {
        let counts = self.counts();
        let total: u64 = counts.iter().map(|c| c.0).sum();
        let read: u64 = counts.iter().map(|c| c.1).sum();
        read as f64 / total.max(1) as f64
    }

    /// The input bill with reads at 0.1× and writes at 1.25×, against all tokens at 1×.
    pub fn bill(&self) -> f64 {
        let counts = self.counts();
        let total: u64 = counts.iter().map(|c| c.0).sum();
        let billed: f64 = counts
            .iter()
            .map(|&(t, r, w)| (t - r - w) as f64 + r as f64 * 0.1 + w as f64 * 1.25)
            .sum();
        billed / total.max(1) as f64
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})),
    )
        .into_response()
}

fn sse(events: &[(&str, Value)]) -> Response {
    let mut out = String::new();
    for (name, data) in events {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    ([("content-type", "text/event-stream")], out).into_response()
}

fn anthropic(st: &mut State, body: &Value) -> Response {
    let blocks = anthropic_blocks(body);
    if blocks.iter().filter(|b| b.2).count() > 4 {
        return error(
            StatusCode::BAD_REQUEST,
            "A maximum of 4 blocks with cache_control may be provided.",
        );
    }
    // Signed thinking must come back byte for byte.
    for m in body["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "thinking"
                && !st
                    .signatures
                    .contains(b["signature"].as_str().unwrap_or_default())
            {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Invalid `signature` in `thinking` block",
                );
            }
        }
    }
    let mut hashes = Vec::with_capacity(blocks.len());
    let mut ends = Vec::with_capacity(blocks.len());
    let mut hash = Sha256::new();
    let mut pos = 0;
    for (v, t, _) in &blocks {
        hash.update(serde_json::to_vec(v).unwrap());
        hashes.push(<[u8; 32]>::from(hash.clone().finalize()));
        pos += t;
        ends.push(pos);
    }
    let total = pos;
    let (mut read, mut upto) = (0, 0);
    for (i, b) in blocks.iter().enumerate() {
        if !b.2 {
            continue;
        }
        let from = i.saturating_sub(LOOKBACK);
        if let Some(j) = (from..=i).rev().find(|&j| st.cached.contains(&hashes[j])) {
            read = read.max(ends[j]);
        }
        upto = upto.max(ends[i]);
    }
    for (i, b) in blocks.iter().enumerate() {
        if b.2 && ends[i] >= MIN_TOKENS {
            st.cached.insert(hashes[i]);
        }
    }
    let written = if upto >= MIN_TOKENS {
        upto.saturating_sub(read)
    } else {
        0
    };
    let read = if upto >= MIN_TOKENS { read } else { 0 };
    st.counts.push((total, read, written));
    let usage = json!({"input_tokens": total - read - written, "output_tokens": 1,
        "cache_read_input_tokens": read, "cache_creation_input_tokens": written});
    if body.get("thinking").is_some()
        && let Some(recorded) = st.thinking_sse.clone()
    {
        // The recorded stream, with this request's usage and its signature remembered.
        for line in recorded.lines() {
            if let Some(sig) = line
                .strip_prefix("data: ")
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
                .and_then(|d| d["delta"]["signature"].as_str().map(str::to_owned))
            {
                st.signatures.insert(sig);
            }
        }
        let recorded: Vec<String> = recorded
            .lines()
            .map(|line| {
                match line
                    .strip_prefix("data: ")
                    .and_then(|d| serde_json::from_str::<Value>(d).ok())
                {
                    Some(mut d) if d["type"] == "message_start" => {
                        d["message"]["usage"] = usage.clone();
                        format!("data: {d}")
                    }
                    _ => line.to_owned(),
                }
            })
            .collect();
        let recorded = recorded.join("\n") + "\n";
        return ([("content-type", "text/event-stream")], recorded).into_response();
    }
    sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": body["model"], "usage": usage}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

fn openai(st: &mut State, body: &Value) -> Response {
    // The prompt as one byte string: tools, then messages; a token is 4 bytes.
    let mut bytes = serde_json::to_vec(&body["tools"]).unwrap();
    for m in body["messages"].as_array().into_iter().flatten() {
        bytes.extend(serde_json::to_vec(m).unwrap());
    }
    let total = (bytes.len() as u64).div_ceil(4);
    let step = |n: u64| Sha256::digest(&bytes[..(n * 4) as usize]).into();
    let mut read = 0;
    let mut n = MIN_TOKENS;
    while n * 4 <= bytes.len() as u64 {
        let h: [u8; 32] = step(n);
        if st.cached.contains(&h) {
            read = n;
        }
        st.cached.insert(h);
        n += 128;
    }
    st.counts.push((total, read, 0));
    let usage = json!({"prompt_tokens": total, "completion_tokens": 1, "total_tokens": total + 1,
        "prompt_tokens_details": {"cached_tokens": read}});
    let chunk = |delta: Value, finish: Value| json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let mut out = String::new();
    for v in [
        chunk(json!({"role": "assistant", "content": "ok"}), Value::Null),
        chunk(json!({}), json!("stop")),
        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": usage}),
    ] {
        out.push_str(&format!("data: {v}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], out).into_response()
}
