//! Server-sent events in, `ProviderEvent`s out: the part every HTTP adapter shares.
//!
//! Bytes go through `Framer` (the WHATWG event-stream rules: lines end at CRLF, LF or CR, a line
//! or a UTF-8 sequence cut between chunks waits for the rest) and each event goes to the
//! adapter's normaliser. Each byte is looked at once, so a line arriving in many small chunks
//! costs linear time, and a line or an event larger than `max_event_bytes` ends the stream with
//! `ProviderError::EventTooLarge` and frees what was buffered. The driver hands the thread back to
//! the runtime after every chunk it takes, so a provider that floods its socket (one endless line,
//! a stream of `:` comments) delays other users' tasks by one budget's worth of chunks, not more.
//! The stream ends after the first error or after `Finished`, so a consumer never sees anything
//! past a terminal item. Parsing only: sending the request and reading a refusal live in
//! `providers::transport`.

use std::collections::VecDeque;
use std::pin::Pin;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::{EventStream, ProviderError, ProviderEvent};

/// The most one SSE line, or one event's data, may hold when no `[routing] max_event_bytes` says
/// otherwise: far above any real event (a whole file's content in one tool call), far below
/// what would let one provider fill the memory.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

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

/// Drives a byte stream through SSE parsing into `normaliser` with the default event cap; the
/// transport's own errors end the stream as they are.
pub fn drive<S, E, N>(bytes: S, normaliser: N) -> EventStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ProviderError> + Send + 'static,
    N: EventNormaliser,
{
    drive_capped(bytes, DEFAULT_MAX_EVENT_BYTES, normaliser)
}

/// As `drive`, with lines and events capped at `max_event_bytes`.
pub fn drive_capped<S, E, N>(bytes: S, max_event_bytes: usize, normaliser: N) -> EventStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ProviderError> + Send + 'static,
    N: EventNormaliser,
{
    drive_with(bytes, Framer::new(max_event_bytes), normaliser)
}

/// As `drive_capped`, and each event's own bytes come first as `ProviderEvent::Raw` (every byte
/// of the body in exactly one of them, comments and blank lines with the event they precede), for
/// a client of the provider's own API.
pub fn drive_raw<S, E, N>(bytes: S, max_event_bytes: usize, normaliser: N) -> EventStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ProviderError> + Send + 'static,
    N: EventNormaliser,
{
    let mut framer = Framer::new(max_event_bytes);
    framer.raw = Some(Vec::new());
    drive_with(bytes, framer, normaliser)
}

fn drive_with<S, E, N>(bytes: S, framer: Framer, normaliser: N) -> EventStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ProviderError> + Send + 'static,
    N: EventNormaliser,
{
    let state = Driver {
        bytes: Some(Box::pin(bytes)),
        framer,
        normaliser,
        queue: VecDeque::new(),
        done: false,
    };
    Box::pin(futures::stream::unfold(state, Driver::step))
}

/// SSE framing, fed chunk by chunk. Complete events wait in `ready`; the line begun in one chunk
/// and not ended yet waits in `line`, and only the bytes of each new chunk are searched for a
/// line end.
struct Framer {
    max: usize,
    /// The unfinished line (bytes, so a UTF-8 sequence cut between chunks waits whole).
    line: Vec<u8>,
    /// The last chunk ended with CR: an LF opening the next one ends nothing new.
    after_cr: bool,
    /// No line was taken yet (a byte-order mark opening the first one is dropped).
    fresh: bool,
    name: String,
    data: String,
    /// A `data` line was seen: an event with empty data is still dispatched.
    has_data: bool,
    /// The bytes of the event being framed, when its raw form is kept (`drive_raw`).
    raw: Option<Vec<u8>>,
    ready: VecDeque<Framed>,
}

/// One dispatched event: its name, its data, and its bytes when they are kept.
struct Framed {
    name: String,
    data: String,
    raw: Option<Bytes>,
}

impl Framer {
    fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            after_cr: false,
            fresh: true,
            name: String::new(),
            data: String::new(),
            has_data: false,
            raw: None,
            ready: VecDeque::new(),
        }
    }

    /// Keeps consumed bytes for the event's raw form (when kept), within the event cap.
    fn keep(&mut self, bytes: &[u8]) -> Result<(), ProviderError> {
        if let Some(raw) = &mut self.raw {
            if raw.len() + bytes.len() > self.max.saturating_mul(2) {
                return Err(ProviderError::EventTooLarge { max: self.max });
            }
            raw.extend_from_slice(bytes);
        }
        Ok(())
    }

    fn too_large(&self) -> ProviderError {
        ProviderError::EventTooLarge { max: self.max }
    }

    fn push(&mut self, mut chunk: &[u8]) -> Result<(), ProviderError> {
        if chunk.is_empty() {
            // Not even the CR–LF pairing may change for an empty chunk.
            return Ok(());
        }
        if std::mem::take(&mut self.after_cr)
            && let Some(rest) = chunk.strip_prefix(b"\n")
        {
            self.keep(b"\n")?;
            chunk = rest;
        }
        while let Some(end) = chunk.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let (head, rest) = chunk.split_at(end);
            let ending = match rest {
                [b'\r', b'\n', ..] => 2,
                [b'\r'] => {
                    self.after_cr = true;
                    1
                }
                _ => 1,
            };
            if self.line.is_empty() {
                self.keep(head)?;
                self.keep(&rest[..ending])?;
                self.take_line(head)?;
            } else {
                self.extend(head)?;
                self.keep(&rest[..ending])?;
                let line = std::mem::take(&mut self.line);
                self.take_line(&line)?;
            }
            chunk = &rest[ending..];
        }
        self.extend(chunk)
    }

    /// Appends to the unfinished line, within the cap.
    fn extend(&mut self, bytes: &[u8]) -> Result<(), ProviderError> {
        if self.line.len() + bytes.len() > self.max {
            return Err(self.too_large());
        }
        self.keep(bytes)?;
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// One complete line: a field, a comment, or the blank line that dispatches the event.
    fn take_line(&mut self, mut line: &[u8]) -> Result<(), ProviderError> {
        if std::mem::take(&mut self.fresh) {
            // Here rather than on the first chunk, which may hold part of the mark only.
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                let name = std::mem::take(&mut self.name);
                let name = if name.is_empty() {
                    "message".to_owned()
                } else {
                    name
                };
                let raw = self.raw.as_mut().map(|r| Bytes::from(std::mem::take(r)));
                self.ready.push_back(Framed {
                    name,
                    data: std::mem::take(&mut self.data),
                    raw,
                });
            } else {
                self.name.clear();
            }
            return Ok(());
        }
        if line.len() > self.max {
            return Err(self.too_large());
        }
        // A comment (`: keep-alive`) carries nothing, and is not even checked for UTF-8.
        if line[0] == b':' {
            return Ok(());
        }
        let line = std::str::from_utf8(line)
            .map_err(|_| ProviderError::Protocol("the stream is not UTF-8".into()))?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.data.len() + value.len() + 1 > self.max {
                    return Err(self.too_large());
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => value.clone_into(&mut self.name),
            // `id`, `retry` and unknown fields mean nothing to a one-shot answer.
            _ => {}
        }
        Ok(())
    }

    /// The body ended: an event its last blank line never dispatched is dispatched now (a body
    /// may end without it; Anthropic's SDK fixture does).
    fn end(&mut self) -> Result<(), ProviderError> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.take_line(&line)?;
        }
        self.take_line(b"")
    }
}

struct Driver<S, N> {
    /// The body; `None` once it ended or failed (dropping it closes the connection).
    bytes: Option<Pin<Box<S>>>,
    framer: Framer,
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
            if let Some(Framed { name, data, raw }) = self.framer.ready.pop_front() {
                match self.normaliser.feed(&name, &data) {
                    Ok(events) => {
                        self.queue.extend(raw.map(ProviderEvent::Raw));
                        self.queue.extend(events);
                        if self.normaliser.is_complete()
                            && let Err(err) = self.close()
                        {
                            return self.fail(err);
                        }
                    }
                    Err(err) => return self.fail(err),
                }
                continue;
            }
            let Some(bytes) = self.bytes.as_mut() else {
                // The body ended and every event it held was fed.
                if let Err(err) = self.close() {
                    return self.fail(err);
                }
                continue;
            };
            match bytes.next().await {
                Some(Ok(chunk)) => {
                    if let Err(err) = self.framer.push(&chunk) {
                        return self.fail(err);
                    }
                    // A socket that always has bytes would keep this task (and every task queued
                    // behind it on the thread) running: one budget unit per chunk, and the task
                    // yields when the budget is spent.
                    tokio::task::consume_budget().await;
                }
                Some(Err(err)) => return self.fail(err.into()),
                None => {
                    self.bytes = None;
                    if let Err(err) = self.framer.end() {
                        return self.fail(err);
                    }
                }
            }
        }
    }

    fn close(&mut self) -> Result<(), ProviderError> {
        self.done = true;
        self.bytes = None;
        let finished = self.normaliser.finish()?;
        self.queue.push_back(finished);
        Ok(())
    }

    /// An error ends the stream; output already queued is dropped with it, since the
    /// caller reports the error instead of a finish. The connection and the framing buffers
    /// go at once, not when the consumer drops the stream.
    fn fail(mut self, err: ProviderError) -> Step<Self> {
        self.done = true;
        self.bytes = None;
        self.queue.clear();
        self.framer = Framer::new(self.framer.max);
        Some((Err(err), self))
    }
}

/// Parses one event's data as JSON, or says it is not JSON without repeating it.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(data: &str) -> Result<T, ProviderError> {
    serde_json::from_str(data.trim())
        .map_err(|e| ProviderError::Protocol(format!("an event is not valid JSON ({e})")))
}
