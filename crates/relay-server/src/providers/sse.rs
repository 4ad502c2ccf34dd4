//! Server-sent events in, `ProviderEvent`s out: the part every HTTP adapter shares.
//!
//! Bytes go through `eventsource-stream` (which keeps a line split across chunks, a CR apart
//! from its LF, or a UTF-8 sequence cut in two, until the rest arrives) and each event goes to
//! the adapter's normaliser. The stream ends after the first error or after `Finished`, so a
//! consumer never sees anything past a terminal item. Parsing only: sending the request and
//! reading a refusal live in `providers::transport`.

use std::collections::VecDeque;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

use super::{EventStream, ProviderError, ProviderEvent};

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
