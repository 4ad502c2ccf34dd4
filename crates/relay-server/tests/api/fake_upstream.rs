//! A scriptable fake OpenAI-compatible upstream (a test double): it answers `/chat/completions`
//! per upstream model name from a script, records every request body, and tells the test when a
//! streamed answer was dropped by the client.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// One scripted answer.
#[derive(Clone)]
pub enum Reply {
    /// SSE chunks sent one after another, with an optional pause before each after the first.
    Sse {
        chunks: Vec<String>,
        pause: Duration,
    },
    /// Chunks, then the connection is cut (the body errors).
    SseThenCut(Vec<String>),
    /// Chunks, then silence forever (the body stays open).
    SseThenSilence(Vec<String>),
    /// A status with a JSON body and optional Retry-After seconds.
    Status {
        status: u16,
        body: Value,
        retry_after: Option<u64>,
    },
    /// Never answers: no headers at all.
    NoHeaders,
    /// `head`, then nothing until the test opens `gate` (`Notify::notify_one`), then `tail`: a leg
    /// held open for as long as the test needs.
    SseGated {
        head: Vec<String>,
        gate: Arc<Notify>,
        tail: Vec<String>,
    },
}

#[derive(Clone, Default)]
struct Shared {
    script: Arc<Mutex<HashMap<String, VecDeque<Reply>>>>,
    requests: Arc<Mutex<Vec<Value>>>,
    dropped: Arc<Notify>,
}

pub struct FakeUpstream {
    pub addr: SocketAddr,
    shared: Shared,
}

/// Signals when the streamed body it is part of is dropped (the client went away).
struct DropSignal(Arc<Notify>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

impl FakeUpstream {
    pub async fn start() -> Self {
        let shared = Shared::default();
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, shared }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues `reply` for the next request naming `model`; with nothing queued the model answers "ok".
    pub fn push(&self, model: &str, reply: Reply) {
        self.shared
            .script
            .lock()
            .unwrap()
            .entry(model.to_owned())
            .or_default()
            .push_back(reply);
    }

    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Waits until a streamed answer was dropped by the client.
    pub async fn wait_dropped(&self) {
        tokio::time::timeout(Duration::from_secs(10), self.shared.dropped.notified())
            .await
            .expect("the upstream connection was not closed");
    }
}

async fn answer(State(shared): State<Shared>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = request["model"].as_str().unwrap_or_default().to_owned();
    shared.requests.lock().unwrap().push(request);
    let reply = shared
        .script
        .lock()
        .unwrap()
        .get_mut(&model)
        .and_then(VecDeque::pop_front)
        .unwrap_or_else(|| text_reply(&["ok"]));
    let dropped = shared.dropped.clone();
    match reply {
        Reply::Status {
            status,
            body,
            retry_after,
        } => {
            let mut r = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
            if let Some(s) = retry_after {
                r.headers_mut().insert("retry-after", s.into());
            }
            r
        }
        Reply::NoHeaders => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        Reply::Sse { chunks, pause } => {
            let stream = futures::stream::unfold(
                (chunks.into_iter(), true, DropSignal(dropped)),
                move |(mut it, first, g)| async move {
                    let chunk = it.next()?;
                    if !first && !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    Some((Ok::<_, std::io::Error>(Bytes::from(chunk)), (it, false, g)))
                },
            );
            sse(Body::from_stream(stream))
        }
        Reply::SseThenCut(chunks) => {
            // The cut comes a moment after the chunks, so they reach the client first (hyper drops
            // unflushed data when a body fails).
            let head = futures::stream::iter(
                chunks
                    .into_iter()
                    .map(|c| Ok::<_, std::io::Error>(Bytes::from(c))),
            );
            let cut = futures::stream::once(async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err::<Bytes, _>(std::io::Error::other("cut"))
            });
            use futures::StreamExt;
            sse(Body::from_stream(head.chain(cut)))
        }
        Reply::SseGated { head, gate, tail } => {
            use futures::StreamExt;
            let bytes = |chunks: Vec<String>| {
                futures::stream::iter(
                    chunks
                        .into_iter()
                        .map(|c| Ok::<_, std::io::Error>(Bytes::from(c))),
                )
            };
            let rest = futures::stream::once(async move {
                gate.notified().await;
                bytes(tail)
            })
            .flatten();
            sse(Body::from_stream(bytes(head).chain(rest)))
        }
        Reply::SseThenSilence(chunks) => {
            let guard = DropSignal(dropped);
            let head = futures::stream::iter(
                chunks
                    .into_iter()
                    .map(|c| Ok::<_, std::io::Error>(Bytes::from(c))),
            );
            let tail = futures::stream::unfold(guard, |g| async move {
                std::future::pending::<()>().await;
                Some((Ok(Bytes::new()), g))
            });
            use futures::StreamExt;
            sse(Body::from_stream(head.chain(tail)))
        }
    }
}

fn sse(body: Body) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

/// `data: {json}\n\n`
/// One SSE event. A chunk gets the fields every Chat Completions chunk carries (`id`, `object`,
/// `created`, `model`) where the script left them out: since a same-family answer reaches the
/// client as the provider sent it (issue 39), SDKs read these chunks themselves.
pub fn data(mut v: Value) -> String {
    if let Some(chunk) = v.as_object_mut().filter(|c| c.contains_key("choices")) {
        for (key, value) in [
            ("id", json!("chatcmpl-fake")),
            ("object", json!("chat.completion.chunk")),
            ("created", json!(1_700_000_000)),
            ("model", json!("fake-model")),
        ] {
            chunk.entry(key).or_insert(value);
        }
    }
    format!("data: {v}\n\n")
}

pub fn text_chunk(text: &str) -> String {
    data(json!({"choices": [{"index": 0, "delta": {"content": text}}]}))
}

pub fn reasoning_chunk(text: &str) -> String {
    data(json!({"choices": [{"index": 0, "delta": {"reasoning_content": text}}]}))
}

pub fn finish(reason: &str) -> String {
    data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

pub fn usage(input: u64, output: u64) -> String {
    data(json!({"choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output}}))
}

pub const DONE: &str = "data: [DONE]\n\n";

/// A complete streamed text answer.
pub fn text_reply(pieces: &[&str]) -> Reply {
    let mut chunks: Vec<String> = pieces.iter().map(|p| text_chunk(p)).collect();
    chunks.extend([finish("stop"), usage(12, 3), DONE.to_owned()]);
    Reply::Sse {
        chunks,
        pause: Duration::ZERO,
    }
}

/// A streamed tool call (arguments in two fragments) ending with `tool_calls`.
pub fn tool_call_reply(id: &str, name: &str, args: &str) -> Reply {
    let (a, b) = args.split_at(args.len() / 2);
    let start = data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": a}}]}}]}));
    let rest = data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": b}}]}}]}));
    Reply::Sse {
        chunks: vec![
            start,
            rest,
            finish("tool_calls"),
            usage(20, 5),
            DONE.to_owned(),
        ],
        pause: Duration::ZERO,
    }
}
