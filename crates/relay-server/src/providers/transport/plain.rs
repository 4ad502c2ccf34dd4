//! Plain-`http://` providers (llama.cpp, Ollama, vLLM, LM Studio on a machine of one's own):
//! HTTP/1.1 on connections the leg drives itself, with ureq-proto's protocol state machine.
//!
//! Each open leg to such a provider holds a connection of its own, as HTTP/1.1 allows no more.
//! Through reqwest that connection is a hyper client connection: a task of its own, a request
//! channel and two 8 KiB buffers, about 18 KB of the 34 KB an open leg cost (BENCHMARKS.md). Here
//! the leg's own task writes the request and reads the socket into a buffer on the thread's stack,
//! so a leg waiting for its next event holds the socket and the protocol state, and no buffer,
//! and no hand-off between tasks happens on the way. ureq-proto (ureq's own HTTP/1.1 core, no I/O)
//! writes the request head and parses the response: status line, headers, `Content-Length`,
//! chunked and close-delimited bodies, `Connection: close`. HTTPS providers stay on reqwest.
//!
//! Connections whose answer was read to its end go back to an idle pool (90 s, as reqwest), and
//! a pooled connection that the provider closed meanwhile is noticed before use; one on which the
//! request could not be written is replaced by a new connection once (a request written whole is
//! never sent twice from here: the provider may have billed it).

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::BoxStream;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use ureq_proto::client::state::{RecvBody, RecvResponse};
use ureq_proto::client::{Call, RecvBodyResult, RecvResponseResult, SendRequestResult};
use ureq_proto::http::{self, HeaderMap, StatusCode};

use super::refusal::BROKE;
use crate::providers::ProviderError;

/// How long a new connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// An idle connection older than this is closed rather than used (reqwest's default).
const IDLE_FOR: Duration = Duration::from_secs(90);
/// Idle connections kept for the next legs; more are closed.
const MAX_IDLE: usize = 256;
/// The most a request head may take (the adapters' few headers need far less).
const HEAD_ROOM: usize = 8 * 1024;
/// The longest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// One read from the socket, into a buffer on the stack that no open leg keeps.
const READ: usize = 16 * 1024;
/// The most capacity an open leg keeps for bytes read but not yet decoded, once there are none.
const KEEP: usize = 4 * 1024;

/// A provider's idle connections, one origin per provider.
#[derive(Default)]
pub struct Pool {
    /// Oldest first: legs take the newest, and the front is where connections expire.
    idle: Mutex<VecDeque<Idle>>,
}

struct Idle {
    stream: TcpStream,
    since: Instant,
}

/// The answer's status and headers, and its body as it arrives.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: BoxStream<'static, Result<Bytes, ProviderError>>,
}

impl Pool {
    /// POSTs `body` to `url` with `headers` and waits for the answer's head.
    pub async fn post(
        self: &Arc<Self>,
        url: &reqwest::Url,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<Answer, ProviderError> {
        let host = url
            .host_str()
            .ok_or_else(|| ProviderError::Connect("the provider's URL names no host".into()))?;
        let port = url.port_or_known_default().unwrap_or(80);
        let mut request = Some(request_of(url, host, headers, body.len())?);
        // `[::1]` in the URL and the `Host` header; the address to connect to is `::1`.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let mut pooled = self.take();
        loop {
            let Some(this) = request.take() else {
                return Err(ProviderError::Connect("connection failed".into()));
            };
            let (stream, reused) = match pooled.take() {
                Some(stream) => {
                    // A request on a reused connection may have to go again: keep a copy.
                    request = Some(this.clone());
                    (stream, true)
                }
                None => (connect(host, port).await?, false),
            };
            let (bytes, call) = encode(this, &body)?;
            match exchange(stream, &bytes, call).await {
                Ok((stream, call, response, rest)) => {
                    return Ok(self.answer(stream, call, response, rest));
                }
                // The provider closed an idle connection as it was taken and the request could
                // not even be written: it never reached the provider, so it goes once more, on a
                // new connection. A request written in full is never sent again here (the
                // provider may have started on it, and billed it); it fails like any other
                // failure before the first byte, and routing decides (RELIABILITY.md).
                Err(Failure::Unsent) if reused => {}
                Err(Failure::Unsent | Failure::Unanswered | Failure::Io) => {
                    return Err(ProviderError::Connect("connection failed".into()));
                }
                Err(Failure::Protocol(what)) => return Err(ProviderError::Protocol(what.into())),
            }
        }
    }

    /// An idle connection still open and quiet, if there is one.
    fn take(&self) -> Option<TcpStream> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(entry) = idle.pop_back() {
            if entry.since.elapsed() < IDLE_FOR && is_quiet(&entry.stream) {
                return Some(entry.stream);
            }
        }
        None
    }

    fn put(&self, stream: TcpStream) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        // Connections idle too long are closed here too, so a quiet provider's pool does not
        // keep the sockets of a past burst open.
        while idle.front().is_some_and(|e| e.since.elapsed() >= IDLE_FOR) {
            idle.pop_front();
        }
        if idle.len() < MAX_IDLE {
            idle.push_back(Idle {
                stream,
                since: Instant::now(),
            });
        }
    }

    /// How many connections wait for a leg (for tests).
    pub fn idle_count(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn answer(
        self: &Arc<Self>,
        stream: TcpStream,
        call: Option<Call<RecvBody>>,
        response: http::Response<()>,
        rest: Vec<u8>,
    ) -> Answer {
        let (parts, ()) = response.into_parts();
        let reader = match call {
            Some(call) => Reader {
                stream: Some(stream),
                call: Some(call),
                pending: rest,
                pool: self.clone(),
            },
            // No body at all (a 204, a `Content-Length: 0`): the connection is free at once.
            None => {
                if rest.is_empty() {
                    self.put(stream);
                }
                Reader::ended(self.clone())
            }
        };
        Answer {
            status: parts.status,
            headers: parts.headers,
            body: Box::pin(futures::stream::unfold(reader, |mut reader| async move {
                let next = reader.next().await?;
                Some((next, reader))
            })),
        }
    }
}

/// The request's head, with `Host` (`host` as the URL writes it, and its port) and
/// `Content-Length` set.
fn request_of(
    url: &reqwest::Url,
    host: &str,
    mut headers: HeaderMap,
    body_len: usize,
) -> Result<http::Request<()>, ProviderError> {
    let bad = || ProviderError::Connect("the request could not be sent".into());
    let host = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    headers.insert(
        http::header::HOST,
        http::HeaderValue::from_str(&host).map_err(|_| bad())?,
    );
    headers.insert(
        http::header::CONTENT_LENGTH,
        http::HeaderValue::from(body_len),
    );
    let mut request = http::Request::post(url.as_str())
        .body(())
        .map_err(|_| bad())?;
    *request.headers_mut() = headers;
    Ok(request)
}

/// The request's bytes (the head as ureq-proto writes it, then the body), and the protocol
/// state that reads its answer.
fn encode(
    request: http::Request<()>,
    body: &[u8],
) -> Result<(Vec<u8>, Call<RecvResponse>), ProviderError> {
    let failed = |_| ProviderError::Connect("the request could not be sent".into());
    let mut call = Call::new(request).map_err(failed)?.proceed();
    // Room for the head and the body in one allocation: the head is written into the front,
    // the body copied after it.
    let mut bytes = vec![0; HEAD_ROOM + body.len()];
    let mut head = 0;
    while !call.can_proceed() {
        head += call.write(&mut bytes[head..HEAD_ROOM]).map_err(failed)?;
    }
    bytes[head..head + body.len()].copy_from_slice(body);
    bytes.truncate(head + body.len());
    let call = match call.proceed().map_err(failed)? {
        Some(SendRequestResult::SendBody(mut sending)) => {
            // The body goes out of `bytes` as it is: tell ureq-proto it was sent.
            sending.consume_direct_write(body.len()).map_err(failed)?;
            sending.proceed()
        }
        Some(SendRequestResult::RecvResponse(call)) => Some(call),
        _ => None,
    };
    let call =
        call.ok_or_else(|| ProviderError::Connect("the request could not be sent".into()))?;
    Ok((bytes, call))
}

enum Failure {
    /// The request could not be written whole: the provider cannot have read it.
    Unsent,
    /// The request was written, then the connection ended or broke before any byte of the answer.
    Unanswered,
    /// It broke after the answer began.
    Io,
    /// The answer is not HTTP/1.1 that can be read.
    Protocol(&'static str),
}

/// Sends the request on `stream` and reads the answer's head; what followed the head is returned
/// with it, with the state that reads the body (`None` when there is none).
async fn exchange(
    mut stream: TcpStream,
    request: &[u8],
    mut call: Call<RecvResponse>,
) -> Result<
    (
        TcpStream,
        Option<Call<RecvBody>>,
        http::Response<()>,
        Vec<u8>,
    ),
    Failure,
> {
    stream
        .write_all(request)
        .await
        .map_err(|_| Failure::Unsent)?;
    let mut head: Vec<u8> = Vec::new();
    loop {
        stream.readable().await.map_err(|_| Failure::Io)?;
        match read_now(&stream, &mut head) {
            Ok(0) if head.is_empty() => return Err(Failure::Unanswered),
            Ok(0) => return Err(Failure::Io),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) if head.is_empty() => return Err(Failure::Unanswered),
            Err(_) => return Err(Failure::Io),
        }
        let (used, response) = call
            .try_response(&head, false)
            .map_err(|_| Failure::Protocol("the answer's head is not valid HTTP/1.1"))?;
        if used > MAX_HEAD {
            return Err(Failure::Protocol("the answer's head is too large"));
        }
        // A `100 Continue` or another informational answer is consumed and skipped.
        head.drain(..used);
        let Some(response) = response else {
            if head.len() > MAX_HEAD {
                return Err(Failure::Protocol("the answer's head is too large"));
            }
            continue;
        };
        let body = match call.proceed() {
            Some(RecvResponseResult::RecvBody(body)) => Some(body),
            Some(RecvResponseResult::Redirect(_) | RecvResponseResult::Cleanup(_)) => None,
            None => return Err(Failure::Protocol("the answer's head is incomplete")),
        };
        return Ok((stream, body, response, head));
    }
}

/// Appends what the socket has now to `into`, through a buffer that lives on the stack only
/// for this call (never across an `await`, so no future keeps it).
fn read_now(stream: &TcpStream, into: &mut Vec<u8>) -> io::Result<usize> {
    let mut buf = [0u8; READ];
    let n = stream.try_read(&mut buf)?;
    into.extend_from_slice(&buf[..n]);
    Ok(n)
}

/// True when an idle connection has neither been closed nor sent anything since its last answer.
fn is_quiet(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

async fn connect(host: &str, port: u16) -> Result<TcpStream, ProviderError> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host, port)))
        .await
        .map_err(|_| ProviderError::Connect("timed out".into()))?
        .map_err(|_| ProviderError::Connect("connection failed".into()))?;
    // Each event should leave as soon as it is written (as reqwest was set up).
    stream
        .set_nodelay(true)
        .map_err(|_| ProviderError::Connect("connection failed".into()))?;
    Ok(stream)
}

/// Reads one answer's body off its connection, and gives the connection back to the pool when
/// the body ended cleanly.
struct Reader {
    stream: Option<TcpStream>,
    call: Option<Call<RecvBody>>,
    /// Bytes read but not yet decoded (a chunk header cut in two, say); mostly empty.
    pending: Vec<u8>,
    pool: Arc<Pool>,
}

impl Reader {
    fn ended(pool: Arc<Pool>) -> Self {
        Self {
            stream: None,
            call: None,
            pending: Vec::new(),
            pool,
        }
    }

    async fn next(&mut self) -> Option<Result<Bytes, ProviderError>> {
        loop {
            if !self.pending.is_empty() {
                match self.decode() {
                    Ok(Some(bytes)) => {
                        // The end of the body may have come with these bytes: the connection is
                        // free now, whether or not the caller reads on (it stops at `[DONE]`).
                        self.finish_if_ended();
                        return Some(Ok(bytes));
                    }
                    Ok(None) => {}
                    Err(e) => return Some(Err(self.fail(ProviderError::Protocol(e.into())))),
                }
            }
            if self.finish_if_ended() {
                return None;
            }
            let stream = self.stream.as_ref()?;
            if stream.readable().await.is_err() {
                return Some(Err(self.fail(broke())));
            }
            match read_now(stream, &mut self.pending) {
                Ok(0) => {
                    // The provider closed: the end of a close-delimited body, else a break.
                    let close_delimited = self
                        .call
                        .as_ref()
                        .is_some_and(|c| c.body_mode() == ureq_proto::BodyMode::CloseDelimited);
                    let broken = self.fail(broke());
                    return (!close_delimited).then_some(Err(broken));
                }
                Ok(_) => {
                    // A provider that keeps the socket full would never let `readable` wait:
                    // each read spends a unit of the task's budget, so the task yields to the
                    // others on the thread when it is spent.
                    tokio::task::consume_budget().await;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return Some(Err(self.fail(broke()))),
            }
        }
    }

    /// Decodes what is pending into body bytes; `None` when more input is needed first.
    fn decode(&mut self) -> Result<Option<Bytes>, &'static str> {
        let Some(call) = self.call.as_mut() else {
            // The body is over; anything after it means the connection is not reusable.
            self.pending.clear();
            self.stream = None;
            return Ok(None);
        };
        let mut out = vec![0; self.pending.len()];
        let (mut used, mut produced) = (0, 0);
        loop {
            let (i, o) = call
                .read(&self.pending[used..], &mut out[produced..])
                .map_err(|_| "the answer's body is not valid HTTP/1.1 framing")?;
            used += i;
            produced += o;
            if (i == 0 && o == 0) || used == self.pending.len() || call.can_proceed() {
                break;
            }
        }
        self.pending.drain(..used);
        if self.pending.is_empty() && self.pending.capacity() > KEEP {
            // A large read's capacity is not kept by a leg that may now wait for minutes.
            self.pending = Vec::new();
        }
        out.truncate(produced);
        Ok((!out.is_empty()).then(|| Bytes::from(out)))
    }

    /// When the body has ended: the connection goes back to the pool if nothing followed the
    /// body and the provider did not ask to close it. True once there is nothing more to read.
    fn finish_if_ended(&mut self) -> bool {
        let Some(call) = self.call.take() else {
            return self.stream.is_none();
        };
        if !call.can_proceed() || call.body_mode() == ureq_proto::BodyMode::CloseDelimited {
            self.call = Some(call);
            return false;
        }
        let reusable = matches!(call.proceed(), Some(RecvBodyResult::Cleanup(c)) if !c.must_close_connection());
        if let Some(stream) = self.stream.take()
            && reusable
            && self.pending.is_empty()
        {
            self.pool.put(stream);
        }
        true
    }

    /// Ends the body here: the connection is closed, never pooled, and `err` is what the leg
    /// is told.
    fn fail(&mut self, err: ProviderError) -> ProviderError {
        self.stream = None;
        self.call = None;
        self.pending = Vec::new();
        err
    }
}

fn broke() -> ProviderError {
    ProviderError::Connect(BROKE.into())
}
