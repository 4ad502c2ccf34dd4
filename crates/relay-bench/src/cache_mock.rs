//! A mock upstream that caches prompt prefixes as the providers document it, for the prompt-cache
//! rows: the share of prompt tokens read from the cache, and the input bill, of the same client
//! requests sent directly and through Relay.
//!
//! A token is 4 bytes of a prompt element's JSON (without its `cache_control`).
//! Anthropic style (`…/v1/messages`): the prompt is tools, then system blocks, then message
//! blocks; a `cache_control` marker ends a cacheable prefix (more than 4 markers is a 400); a
//! marker reads the longest prefix cached at it or at one of the 20 blocks before it, and writes
//! the prefix up to it; prefixes under 1,024 tokens are not cached; the usage reports
//! `cache_read_input_tokens` and `cache_creation_input_tokens`, and `input_tokens` excludes both.
//! OpenAI style (anything else): automatic, prefixes of 1,024 tokens and more in 128-token steps;
//! `prompt_tokens` counts all, `prompt_tokens_details.cached_tokens` the part read.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;
use axum::body::Bytes;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

const MIN_TOKENS: u64 = 1024;
const STEP_TOKENS: u64 = 128;
const LOOKBACK: usize = 20;
const MAX_MARKERS: usize = 4;
/// Anthropic's multipliers of the input price: cache reads and cache writes.
pub const READ_PRICE: f64 = 0.1;
pub const WRITE_PRICE: f64 = 1.25;

/// Prompt tokens of one request: all of them, those read from the cache, those written to it.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    pub total: u64,
    pub read: u64,
    pub written: u64,
}

/// The sums over a session.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Session {
    pub requests: usize,
    pub total: u64,
    pub read: u64,
    pub written: u64,
}

impl Session {
    /// The share of all prompt tokens read from the cache.
    pub fn share(&self) -> f64 {
        self.read as f64 / self.total.max(1) as f64
    }

    /// The input bill in units of the input price: reads at 0.1×, writes at 1.25×, the rest 1×.
    pub fn bill(&self) -> f64 {
        let rest = self.total.saturating_sub(self.read + self.written) as f64;
        rest + self.read as f64 * READ_PRICE + self.written as f64 * WRITE_PRICE
    }
}

#[derive(Default)]
struct State {
    /// Prefix hashes cached (Anthropic: at breakpoints; OpenAI: at 128-token steps).
    cached: HashSet<u64>,
    counts: Vec<Counts>,
    bodies: Vec<Value>,
}

/// The running mock, on the caller's runtime.
pub struct CacheMock {
    pub url: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CacheMock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CacheMock {
    pub async fn start() -> Result<Self> {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, body: Bytes| {
            let shared = shared.clone();
            async move {
                let Ok(body) = serde_json::from_slice::<Value>(&body) else {
                    return error(StatusCode::BAD_REQUEST, "the body is not JSON");
                };
                let mut st = shared.lock().unwrap_or_else(PoisonError::into_inner);
                st.bodies.push(body.clone());
                if uri.path().ends_with("/v1/messages") {
                    anthropic(&mut st, &body)
                } else {
                    openai(&mut st, &body)
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("cache mock: {e}");
            }
        });
        Ok(Self {
            url: format!("http://{addr}"),
            state,
            task,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the cache and every request: the next session starts cold.
    pub fn reset(&self) {
        let mut st = self.state();
        st.cached.clear();
        st.counts.clear();
        st.bodies.clear();
    }

    /// The request bodies received since the last reset.
    pub fn bodies(&self) -> Vec<Value> {
        self.state().bodies.clone()
    }

    /// The sums since the last reset.
    pub fn session(&self) -> Session {
        let st = self.state();
        st.counts.iter().fold(
            Session {
                requests: st.counts.len(),
                ..Session::default()
            },
            |mut s, c| {
                s.total += c.total;
                s.read += c.read;
                s.written += c.written;
                s
            },
        )
    }
}

fn tokens_of(bytes: usize) -> u64 {
    u64::try_from(bytes).unwrap_or(u64::MAX).div_ceil(4)
}

fn unmarked(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("cache_control");
    }
    v
}

fn marked(v: &Value) -> bool {
    v.get("cache_control").is_some_and(|c| !c.is_null())
}

/// The prompt as blocks: (its bytes without markers, with its place, and whether it is marked).
fn anthropic_blocks(body: &Value) -> Vec<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut push = |v: &Value, place: &Value| {
        let bytes = serde_json::to_vec(&json!([place, unmarked(v)])).unwrap_or_default();
        out.push((bytes, marked(v)));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push(t, &json!("tool"));
    }
    match &body["system"] {
        Value::String(s) => push(&json!({"type": "text", "text": s}), &json!("system")),
        Value::Array(blocks) => blocks.iter().for_each(|b| push(b, &json!("system"))),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        match &m["content"] {
            Value::String(s) => push(&json!({"type": "text", "text": s}), &m["role"]),
            Value::Array(blocks) => blocks.iter().for_each(|b| push(b, &m["role"])),
            _ => {}
        }
    }
    out
}

fn error(status: StatusCode, message: &str) -> Response {
    let body =
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
    (status, axum::Json(body)).into_response()
}

fn anthropic(st: &mut State, body: &Value) -> Response {
    let blocks = anthropic_blocks(body);
    if blocks.iter().filter(|b| b.1).count() > MAX_MARKERS {
        return error(
            StatusCode::BAD_REQUEST,
            "A maximum of 4 blocks with cache_control may be provided.",
        );
    }
    let mut hashes = Vec::with_capacity(blocks.len());
    let mut ends = Vec::with_capacity(blocks.len());
    let mut hasher = DefaultHasher::new();
    let mut pos = 0;
    for (bytes, _) in &blocks {
        hasher.write(bytes);
        hashes.push(hasher.finish());
        pos += tokens_of(bytes.len());
        ends.push(pos);
    }
    let total = pos;
    let (mut read, mut upto) = (0, 0);
    for (i, (_, is_marked)) in blocks.iter().enumerate() {
        if !is_marked {
            continue;
        }
        let from = i.saturating_sub(LOOKBACK);
        if let Some(j) = (from..=i).rev().find(|&j| st.cached.contains(&hashes[j])) {
            read = read.max(ends[j]);
        }
        upto = upto.max(ends[i]);
    }
    for (i, (_, is_marked)) in blocks.iter().enumerate() {
        if *is_marked && ends[i] >= MIN_TOKENS {
            st.cached.insert(hashes[i]);
        }
    }
    let (read, written) = if upto >= MIN_TOKENS {
        (read, upto.saturating_sub(read))
    } else {
        (0, 0)
    };
    st.counts.push(Counts {
        total,
        read,
        written,
    });
    let usage = json!({"input_tokens": total - read - written, "output_tokens": 1,
        "cache_read_input_tokens": read, "cache_creation_input_tokens": written});
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_bench", "type": "message",
            "role": "assistant", "content": [], "model": body["model"], "usage": usage}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ];
    let mut out = String::new();
    for e in events {
        out.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap_or_default()
        ));
    }
    ([("content-type", "text/event-stream")], out).into_response()
}

fn openai(st: &mut State, body: &Value) -> Response {
    // The prompt as one byte string: tools, then messages.
    let mut bytes = serde_json::to_vec(&body["tools"]).unwrap_or_default();
    for m in body["messages"].as_array().into_iter().flatten() {
        bytes.extend(serde_json::to_vec(m).unwrap_or_default());
    }
    let total = tokens_of(bytes.len());
    let mut read = 0;
    let mut n = MIN_TOKENS;
    while n <= total && usize::try_from(n * 4).is_ok_and(|end| end <= bytes.len()) {
        let end = usize::try_from(n * 4).unwrap_or(bytes.len());
        let mut hasher = DefaultHasher::new();
        hasher.write(&bytes[..end]);
        let h = hasher.finish();
        if st.cached.contains(&h) {
            read = n;
        }
        st.cached.insert(h);
        n += STEP_TOKENS;
    }
    st.counts.push(Counts {
        total,
        read,
        written: 0,
    });
    let usage = json!({"prompt_tokens": total, "completion_tokens": 1, "total_tokens": total + 1,
        "prompt_tokens_details": {"cached_tokens": read}});
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": body["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut out = String::new();
    for v in [
        chunk(json!({"role": "assistant", "content": "ok"}), Value::Null),
        chunk(json!({}), json!("stop")),
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": body["model"], "choices": [], "usage": usage}),
    ] {
        out.push_str(&format!("data: {v}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], out).into_response()
}
