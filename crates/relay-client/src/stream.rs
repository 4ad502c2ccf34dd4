//! One agent leg as a `Stream` of [`AgentEvent`]s read from the NDJSON body.
//!
//! Keep-alive `ping` lines and event kinds newer than this client are skipped (CONTRACT.md: clients
//! ignore unknown event kinds). The stream ends after the terminal event; a body that ends before
//! one yields [`Error::Truncated`]. Dropping the stream closes the connection, and the relay then
//! cancels the upstream call.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use futures::Stream;
use futures::stream::BoxStream;
use relay_wire::agent::AgentEvent;

use crate::Error;

/// The events of one leg, as they arrive.
pub struct LegStream {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: BytesMut,
    finished: bool,
}

impl LegStream {
    pub(crate) fn new(response: reqwest::Response) -> Self {
        Self::from_body(Box::pin(response.bytes_stream()))
    }

    fn from_body(body: BoxStream<'static, reqwest::Result<bytes::Bytes>>) -> Self {
        Self {
            body,
            buf: BytesMut::new(),
            finished: false,
        }
    }

    /// The next complete line in the buffer, parsed; `None` when no line is complete yet.
    fn next_buffered(&mut self) -> Option<Result<AgentEvent, Error>> {
        while let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
            let line = self.buf.split_to(pos + 1);
            let line = &line[..pos];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse_line(line) {
                Some(Ok(AgentEvent::Ping)) | None => continue,
                Some(event) => return Some(event),
            }
        }
        None
    }
}

/// `None` for a line to skip (an event kind this client does not know).
fn parse_line(line: &[u8]) -> Option<Result<AgentEvent, Error>> {
    match serde_json::from_slice::<AgentEvent>(line) {
        Ok(event) => Some(Ok(event)),
        Err(e) => {
            let value: serde_json::Value = match serde_json::from_slice(line) {
                Ok(v) => v,
                Err(_) => return Some(Err(Error::Decode(format!("not JSON: {e}")))),
            };
            let known = [
                "start",
                "text",
                "reasoning",
                "ping",
                "tool_calls",
                "done",
                "error",
            ];
            match value.get("event").and_then(|v| v.as_str()) {
                Some(kind) if !known.contains(&kind) => None,
                _ => Some(Err(Error::Decode(format!("bad event line: {e}")))),
            }
        }
    }
}

impl Stream for LegStream {
    type Item = Result<AgentEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.finished {
                return Poll::Ready(None);
            }
            if let Some(item) = self.next_buffered() {
                if matches!(&item, Ok(e) if e.is_terminal()) || item.is_err() {
                    self.finished = true;
                }
                return Poll::Ready(Some(item));
            }
            match self.body.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => self.buf.extend_from_slice(chunk.chunk()),
                Poll::Ready(Some(Err(e))) => {
                    self.finished = true;
                    return Poll::Ready(Some(Err(Error::Transport(e))));
                }
                Poll::Ready(None) => {
                    self.finished = true;
                    // A last line without its newline still counts.
                    if !self.buf.is_empty() {
                        self.buf.extend_from_slice(b"\n");
                        if let Some(item) = self.next_buffered()
                            && matches!(&item, Ok(e) if e.is_terminal())
                        {
                            return Poll::Ready(Some(item));
                        }
                    }
                    return Poll::Ready(Some(Err(Error::Truncated)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn events(chunks: &[&'static str]) -> Vec<Result<AgentEvent, Error>> {
        let body = futures::stream::iter(
            chunks
                .iter()
                .map(|c| Ok(bytes::Bytes::from_static(c.as_bytes())))
                .collect::<Vec<_>>(),
        );
        futures::executor::block_on(LegStream::from_body(Box::pin(body)).collect())
    }

    #[test]
    fn lines_split_across_chunks_pings_skipped_and_the_terminal_event_ends_it() {
        let got = events(&[
            "{\"event\":\"te",
            "xt\",\"text\":\"a\"}\n{\"event\":\"ping\"}\n",
            "{\"event\":\"done\",\"finish_reason\":\"stop\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}\n",
            "{\"event\":\"text\",\"text\":\"after the end\"}\n",
        ]);
        assert_eq!(got.len(), 2);
        assert!(matches!(&got[0], Ok(AgentEvent::Text { text }) if text == "a"));
        assert!(matches!(&got[1], Ok(AgentEvent::Done { .. })));
    }

    #[test]
    fn a_body_without_a_terminal_event_is_truncated() {
        let got = events(&["{\"event\":\"text\",\"text\":\"a\"}\n"]);
        assert!(matches!(got.last(), Some(Err(Error::Truncated))));
    }

    #[test]
    fn unknown_kinds_are_skipped_and_bad_lines_are_errors() {
        assert!(parse_line(br#"{"event":"future_kind","x":1}"#).is_none());
        assert!(matches!(
            parse_line(br#"{"event":"text"}"#),
            Some(Err(Error::Decode(_)))
        ));
        assert!(matches!(
            parse_line(br#"{"event":"text","text":"hi"}"#),
            Some(Ok(AgentEvent::Text { .. }))
        ));
    }
}
