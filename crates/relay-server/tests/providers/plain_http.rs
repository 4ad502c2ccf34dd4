//! A plain-`http://` provider's connections (`providers::transport::plain`), against a raw TCP upstream that
//! writes exactly the bytes each case needs: reuse, a provider closing idle connections, answers
//! cut into single bytes, close-delimited and broken bodies, heads that are not HTTP.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use relay_server::providers::openai::OpenAiProvider;
use relay_server::providers::transport::lanes::{ClientSettings, Lanes};
use relay_server::providers::{ChatMessage, ChatRequest, Provider, ProviderError, ProviderEvent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One answer: a text piece, the finish with usage, the end marker.
const EVENTS: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],",
    "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n",
    "data: [DONE]\n\n",
);

/// The answer with a chunked body, one chunk per event, as llama.cpp and uvicorn send it.
fn chunked_answer() -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    for event in EVENTS.split_inclusive("\n\n") {
        out.extend_from_slice(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes());
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// The heads of the whole requests an upstream read, lowercased, in order.
type Heads = Arc<Mutex<Vec<String>>>;

/// A raw upstream: every accepted connection goes to `serve` with its number (from 0); counts the
/// connections and keeps the heads of the whole requests read.
struct Raw {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    heads: Heads,
}

impl Raw {
    async fn start<F, Fut>(serve: F) -> Self
    where
        F: Fn(Conn, usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self::start_on("127.0.0.1:0", serve).await
    }

    async fn start_on<F, Fut>(bind: &str, serve: F) -> Self
    where
        F: Fn(Conn, usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind(bind).await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let heads = Heads::default();
        let (a, h) = (accepted.clone(), heads.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let n = a.fetch_add(1, Ordering::SeqCst);
                stream.set_nodelay(true).expect("nodelay");
                tokio::spawn(serve(
                    Conn {
                        stream,
                        heads: h.clone(),
                    },
                    n,
                ));
            }
        });
        Self {
            addr,
            accepted,
            heads,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn requests(&self) -> usize {
        self.heads.lock().expect("lock").len()
    }
}

struct Conn {
    stream: TcpStream,
    heads: Heads,
}

impl Conn {
    /// Reads one whole request (head and `Content-Length` body) and keeps its head; false at the
    /// end of the connection.
    async fn request(&mut self) -> bool {
        let mut data = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().expect("length"));
                if data.len() >= end + 4 + len {
                    self.heads.lock().expect("lock").push(head);
                    return true;
                }
            }
            match self.stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => data.extend_from_slice(&buf[..n]),
            }
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }
}

fn setup(addr: SocketAddr) -> (Arc<Lanes>, OpenAiProvider) {
    let lanes = Arc::new(Lanes::new(ClientSettings::system().expect("TLS"), 100).expect("lanes"));
    let provider = OpenAiProvider::new(format!("http://{addr}/v1"), None, lanes.clone());
    (lanes, provider)
}

fn question() -> ChatRequest {
    ChatRequest {
        model: "local".to_owned(),
        system: None,
        messages: vec![ChatMessage::User {
            content: "Hi?".to_owned(),
        }],
        tools: Vec::new(),
        max_tokens: None,
        temperature: None,
        stop: Vec::new(),
        tool_choice: None,
        ..ChatRequest::default()
    }
}

/// The leg's text and whether it finished, or the first error.
async fn leg(provider: &OpenAiProvider) -> Result<(String, bool), ProviderError> {
    let mut events = provider.stream(question()).await?;
    let mut text = String::new();
    let mut finished = false;
    while let Some(event) = events.next().await {
        match event? {
            ProviderEvent::Text(t) => text.push_str(&t),
            ProviderEvent::Finished { .. } => finished = true,
            ProviderEvent::Reasoning(_)
            | ProviderEvent::ReasoningSignature(_)
            | ProviderEvent::RedactedReasoning(_)
            | ProviderEvent::ReasoningItem(_)
            | ProviderEvent::UsageSoFar(_)
            | ProviderEvent::Raw(_) => {}
        }
    }
    Ok((text, finished))
}

#[tokio::test]
async fn legs_one_after_another_share_one_connection() {
    let upstream = Raw::start(|mut conn, _| async move {
        while conn.request().await {
            conn.send(&chunked_answer()).await;
        }
    })
    .await;
    let (lanes, provider) = setup(upstream.addr);
    for _ in 0..3 {
        assert_eq!(leg(&provider).await.expect("a leg"), ("Hello".into(), true));
    }
    assert_eq!(upstream.accepted(), 1);
    assert_eq!(upstream.requests(), 3);
    assert_eq!(lanes.plain().idle_count(), 1);
}

#[tokio::test]
async fn a_provider_on_an_ipv6_address_is_reached() {
    let upstream = Raw::start_on("[::1]:0", |mut conn, _| async move {
        if conn.request().await {
            conn.send(&chunked_answer()).await;
        }
    })
    .await;
    let (_, provider) = setup(upstream.addr);
    assert_eq!(leg(&provider).await.expect("a leg"), ("Hello".into(), true));
    let head = upstream.heads.lock().expect("lock")[0].clone();
    assert!(
        head.contains(&format!("host: [::1]:{}\r\n", upstream.addr.port())),
        "{head}"
    );
}

#[tokio::test]
async fn a_connection_the_provider_closed_after_its_answer_is_not_used_again() {
    // One answer a connection, then the provider hangs up without saying so in a header.
    let upstream = Raw::start(|mut conn, _| async move {
        if conn.request().await {
            conn.send(&chunked_answer()).await;
        }
    })
    .await;
    let (_, provider) = setup(upstream.addr);
    for _ in 0..3 {
        assert_eq!(leg(&provider).await.expect("a leg"), ("Hello".into(), true));
    }
    assert_eq!(upstream.accepted(), 3);
}

#[tokio::test]
async fn a_request_a_reused_connection_read_whole_then_dropped_is_not_sent_again() {
    // The first connection answers once, then reads the whole next request and hangs up without
    // a byte. The provider may have started on (and billed) that request: it must not go again
    // from the connection layer; the leg fails before its first byte, retryable, so routing
    // decides.
    let upstream = Raw::start(|mut conn, n| async move {
        while conn.request().await {
            if n == 0 && conn.heads.lock().expect("lock").len() == 2 {
                return;
            }
            conn.send(&chunked_answer()).await;
        }
    })
    .await;
    let (_, provider) = setup(upstream.addr);
    assert_eq!(leg(&provider).await.expect("first"), ("Hello".into(), true));
    let err = leg(&provider).await.expect_err("no answer to the second");
    assert!(matches!(err, ProviderError::Connect(_)), "{err:?}");
    assert!(err.retryable_before_output());
    assert_eq!(
        upstream.accepted(),
        1,
        "no new connection was opened for it"
    );
    assert_eq!(upstream.requests(), 2, "the read request was sent once");
}

#[tokio::test]
async fn a_new_connection_dropped_unanswered_is_a_connect_error_without_a_second_try() {
    let upstream = Raw::start(|mut conn, _| async move {
        conn.request().await;
    })
    .await;
    let (_, provider) = setup(upstream.addr);
    let err = leg(&provider).await.expect_err("no answer");
    assert!(matches!(err, ProviderError::Connect(_)), "{err:?}");
    assert!(err.retryable_before_output());
    assert_eq!(upstream.accepted(), 1);
}

#[tokio::test]
async fn an_answer_written_a_byte_at_a_time_reads_whole_and_frees_its_connection() {
    let upstream = Raw::start(|mut conn, _| async move {
        while conn.request().await {
            // A byte a write, up to the last event's chunk and the end of the body, which come
            // together (else the leg stops at `[DONE]` before the end is read).
            let answer = chunked_answer();
            let (bytes, last) = answer.split_at(answer.len() - 25);
            for byte in bytes {
                conn.send(&[*byte]).await;
            }
            conn.send(last).await;
        }
    })
    .await;
    let (lanes, provider) = setup(upstream.addr);
    assert_eq!(leg(&provider).await.expect("a leg"), ("Hello".into(), true));
    assert_eq!(leg(&provider).await.expect("a leg"), ("Hello".into(), true));
    assert_eq!(upstream.accepted(), 1);
    assert_eq!(lanes.plain().idle_count(), 1);
}

#[tokio::test]
async fn a_body_that_ends_when_the_provider_closes_is_read_to_the_end() {
    let upstream = Raw::start(|mut conn, _| async move {
        if conn.request().await {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            conn.send(head.as_bytes()).await;
            conn.send(EVENTS.as_bytes()).await;
        }
    })
    .await;
    let (lanes, provider) = setup(upstream.addr);
    assert_eq!(leg(&provider).await.expect("a leg"), ("Hello".into(), true));
    assert_eq!(
        lanes.plain().idle_count(),
        0,
        "a closed connection is not pooled"
    );
}

#[tokio::test]
async fn a_chunked_body_cut_before_its_end_is_a_broken_connection() {
    let upstream = Raw::start(|mut conn, _| async move {
        if conn.request().await {
            let answer = chunked_answer();
            // Up to the middle of the finish event's chunk.
            conn.send(&answer[..answer.len() - 60]).await;
        }
    })
    .await;
    let (lanes, provider) = setup(upstream.addr);
    let err = leg(&provider).await.expect_err("cut");
    assert!(
        matches!(&err, ProviderError::Connect(m) if m.contains("broke")),
        "{err:?}"
    );
    assert_eq!(lanes.plain().idle_count(), 0);
}

#[tokio::test]
async fn answers_that_are_not_http_are_protocol_errors() {
    for answer in [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec(),
        format!(
            "HTTP/1.1 200 OK\r\nx-long: {}\r\n\r\n",
            "a".repeat(70 * 1024)
        )
        .into_bytes(),
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n".to_vec(),
    ] {
        let upstream = Raw::start(move |mut conn, _| {
            let answer = answer.clone();
            async move {
                if conn.request().await {
                    conn.send(&answer).await;
                    // Hold the connection open: the error must come from the bytes.
                    let mut rest = [0u8; 16];
                    let _ = conn.stream.read(&mut rest).await;
                }
            }
        })
        .await;
        let (_, provider) = setup(upstream.addr);
        let err = leg(&provider).await.expect_err("not HTTP");
        assert!(matches!(err, ProviderError::Protocol(_)), "{err:?}");
    }
}
