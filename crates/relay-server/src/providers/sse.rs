//! Server-sent events in, `ProviderEvent`s out: the part every HTTP adapter shares.
//!
//! Bytes go through `eventsource-stream` (which keeps a line split across chunks, a CR apart
//! from its LF, or a UTF-8 sequence cut in two, until the rest arrives) and each event goes to
//! the adapter's normaliser. The stream ends after the first error or after `Finished`, so a
//! consumer never sees anything past a terminal item. Also here: sending the request and turning
//! a non-2xx answer into a `ProviderError` that carries no body, URL or header.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::{EventStream, ProviderError, ProviderEvent, error_from_json};

/// The pure half of an adapter: provider SSE events in, normalised events out.
pub trait EventNormaliser: Send + 'static {
    /// One SSE event: `event` is its name (`"message"` when the server sent none), `data` its
    /// data lines joined by `\n`.
    fn feed(&mut self, event: &str, data: &str) -> Result<Vec<ProviderEvent>, ProviderError>;
    /// The stream is over: the `Finished` event, or an error when the provider never said it
    /// was done although it always does.
    fn finish(&mut self) -> Result<ProviderEvent, ProviderError>;
    /// True once the provider has marked the end of its answer (`[DONE]`, `message_stop`);
    /// the driver then stops reading, so trailing bytes cannot undo a finished answer.
    fn is_complete(&self) -> bool {
        false
    }
}

/// Drives a byte stream through SSE parsing into `normaliser`; the transport's own errors end
/// the stream as they are.
pub fn drive<S, E, N>(bytes: S, normaliser: N) -> EventStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ProviderError> + Send + 'static,
    N: EventNormaliser,
{
    // A body may end without the blank line that dispatches its last event (Anthropic's SDK
    // fixture does); two more line ends flush it, and are harmless after a proper ending.
    let flushed = bytes
        .flat_map(|chunk| futures::stream::iter(pieces(chunk)))
        .chain(futures::stream::once(async {
            Ok(Bytes::from_static(b"\n\n"))
        }));
    let state = Driver {
        events: Box::pin(flushed.eventsource()),
        normaliser,
        queue: VecDeque::new(),
        done: false,
    };
    Box::pin(futures::stream::unfold(state, Driver::step))
}

/// Pieces of a large chunk, each ending at a line end where one is near (slices, no copy).
/// The SSE parser copies the unparsed rest of its buffer after every line it consumes, so a
/// large chunk holding many events would cost it quadratic time; small chunks pass as they are.
fn pieces<E>(chunk: Result<Bytes, E>) -> Vec<Result<Bytes, E>> {
    const PIECE: usize = 4096;
    let chunk = match chunk {
        Ok(chunk) if chunk.len() > PIECE => chunk,
        other => return vec![other],
    };
    let mut out = Vec::new();
    let mut start = 0;
    while chunk.len() - start > PIECE {
        let window = &chunk[start..start + PIECE];
        let cut = match window.iter().rposition(|b| *b == b'\n') {
            Some(i) => start + i + 1,
            // A line longer than a piece: cut after its end, wherever that is.
            None => chunk[start + PIECE..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(chunk.len(), |i| start + PIECE + i + 1),
        };
        out.push(Ok(chunk.slice(start..cut)));
        start = cut;
    }
    if start < chunk.len() {
        out.push(Ok(chunk.slice(start..)));
    }
    out
}

struct Driver<S, N> {
    events: std::pin::Pin<Box<eventsource_stream::EventStream<S>>>,
    normaliser: N,
    queue: VecDeque<ProviderEvent>,
    done: bool,
}

type Step<T> = Option<(Result<ProviderEvent, ProviderError>, T)>;

impl<S, E, N> Driver<S, N>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ProviderError>,
    N: EventNormaliser,
{
    async fn step(mut self) -> Step<Self> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            match self.events.next().await {
                Some(Ok(event)) => match self.normaliser.feed(&event.event, &event.data) {
                    Ok(events) => {
                        self.queue.extend(events);
                        if self.normaliser.is_complete()
                            && let Err(err) = self.close()
                        {
                            return self.fail(err);
                        }
                    }
                    Err(err) => return self.fail(err),
                },
                Some(Err(err)) => return self.fail(stream_error(err)),
                None => {
                    if let Err(err) = self.close() {
                        return self.fail(err);
                    }
                }
            }
        }
    }

    fn close(&mut self) -> Result<(), ProviderError> {
        self.done = true;
        let finished = self.normaliser.finish()?;
        self.queue.push_back(finished);
        Ok(())
    }

    /// An error ends the stream; output already queued is dropped with it, since the
    /// caller reports the error instead of a finish.
    fn fail(mut self, err: ProviderError) -> Step<Self> {
        self.done = true;
        self.queue.clear();
        Some((Err(err), self))
    }
}

fn stream_error<E: Into<ProviderError>>(err: EventStreamError<E>) -> ProviderError {
    match err {
        EventStreamError::Utf8(_) => ProviderError::Protocol("the stream is not UTF-8".into()),
        EventStreamError::Parser(_) => ProviderError::Protocol("malformed SSE framing".into()),
        EventStreamError::Transport(e) => e.into(),
    }
}

/// Parses one event's data as JSON, or says it is not JSON without repeating it.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(data: &str) -> Result<T, ProviderError> {
    serde_json::from_str(data.trim())
        .map_err(|e| ProviderError::Protocol(format!("an event is not valid JSON ({e})")))
}

/// What a transport error while streaming is reported as (its own message may name the URL).
pub(crate) const BROKE: &str = "the connection broke while streaming";

/// Sends a request and waits for the response headers; a non-2xx answer becomes an error.
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, ProviderError> {
    let response = request.send().await.map_err(|e| connect_error(&e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let headers = response.headers().clone();
    Err(refusal(status, &headers, response.bytes_stream()).await)
}

/// The error a non-2xx answer stands for: 429 is a rate limit (with its `Retry-After`), any
/// other status is refined by the error body's type or code where it has one.
pub(crate) async fn refusal<S, E>(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: S,
) -> ProviderError
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        return ProviderError::RateLimited {
            retry_after: retry_after(headers),
        };
    }
    // The error body only refines the message: a slow one is not waited for long.
    let body = tokio::time::timeout(Duration::from_secs(5), read_capped(body, 64 * 1024))
        .await
        .unwrap_or_default();
    let json = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
    error_from_json(Some(status.as_u16()), &json)
}

/// Streams a successful answer's body through `normaliser`.
pub(crate) fn stream_response<N: EventNormaliser>(
    upstream: super::endpoint::Upstream,
    normaliser: N,
) -> EventStream {
    drive(upstream.body, normaliser)
}

/// A reqwest error described by kind only: its `Display` names the URL, and a Gemini URL
/// could carry a key in its query.
fn connect_error(err: &reqwest::Error) -> ProviderError {
    let what = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "connection failed"
    } else if err.is_builder() || err.is_request() {
        "the request could not be sent"
    } else {
        "transport error"
    };
    ProviderError::Connect(what.to_owned())
}

/// `Retry-After` in seconds (OpenAI also sends `retry-after-ms`, more precise).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    header("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
        .map(Duration::from_secs_f64)
}

/// Reads at most `cap` bytes of an error body: enough for the error's type, bounded so a
/// misbehaving upstream cannot make us buffer without limit.
async fn read_capped<S, E>(mut body: S, cap: usize) -> Vec<u8>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let mut out = Vec::new();
    while out.len() < cap {
        match body.next().await {
            Some(Ok(chunk)) => out.extend_from_slice(&chunk),
            Some(Err(_)) | None => break,
        }
    }
    out
}
