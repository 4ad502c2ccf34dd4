//! The mock OpenAI-compatible upstream: `POST /v1/chat/completions` answers at once with a few
//! streamed chunks (every fourth answer a tool call), and the `bench-slow` model sends one chunk
//! and then holds the stream open until the client goes away (the open-stream test).
//!
//! It runs in its own process (`relay-bench mock`) on a single-threaded runtime, so its work stays
//! out of the measured process and it uses at most one of the machine's cores; the smoke test can
//! also run it on its own thread and runtime in-process.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use axum::routing::{get, post};
use futures::StreamExt;

/// Prefix of the line the mock process prints on standard output once it listens.
pub const LISTENING: &str = "mock listening on ";

const ROLE: &str = "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n";

/// A text answer: role, four pieces of text, the finish, usage, `[DONE]`.
const TEXT: &[&str] = &[
    ROLE,
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Run \"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"`cargo test -p billing-core` \"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"with the timeout from \"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"config/billing.toml.\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":14,\"total_tokens\":134}}\n\n",
    "data: [DONE]\n\n",
];

/// A tool call: role, the call's name and first half of its arguments, the second half, the finish,
/// usage, `[DONE]`.
const TOOL: &[&str] = &[
    ROLE,
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_bench_1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"config/billing.toml\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-fast\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":9,\"total_tokens\":129}}\n\n",
    "data: [DONE]\n\n",
];

/// The first and only chunk of a slow answer.
const SLOW_FIRST: &str = "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench-slow\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Thinking\"},\"finish_reason\":null}]}\n\n";

/// The mock's routes; answers are counted so every fourth is a tool call.
pub fn router() -> Router {
    Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/v1/messages", post(crate::doors::messages_answer))
        .route("/health", get(|| async { "ok" }))
        .with_state(Arc::new(AtomicU64::new(0)))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

async fn completions(State(answered): State<Arc<AtomicU64>>, body: Bytes) -> Response {
    // The model name is all the mock needs from the request: a byte search, no JSON parse, so the
    // mock's own cost stays small next to what is measured.
    let chunks: Body = if contains(&body, b"\"bench-slow\"") {
        let first = futures::stream::iter([Ok::<_, Infallible>(Bytes::from_static(
            SLOW_FIRST.as_bytes(),
        ))]);
        Body::from_stream(first.chain(futures::stream::pending()))
    } else {
        let n = answered.fetch_add(1, Ordering::Relaxed);
        let answer = if n % 4 == 3 { TOOL } else { TEXT };
        Body::from_stream(futures::stream::iter(
            answer
                .iter()
                .map(|c| Ok::<_, Infallible>(Bytes::from_static(c.as_bytes()))),
        ))
    };
    let mut response = Response::new(chunks);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    response
}

/// Serves the mock on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    axum::serve(listener, router()).await
}

/// The mock's process mode: a single-threaded runtime, the address printed on standard output;
/// with `tls_ca`, HTTPS with a new certificate whose PEM is written there first.
pub fn run_process(port: u16, tls_ca: Option<&Path>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let acceptor = tls_ca.map(crate::tls::acceptor).transpose()?;
        println!("{LISTENING}{}", listener.local_addr()?);
        match acceptor {
            Some(acceptor) => crate::tls::serve(listener, acceptor, router()).await?,
            None => serve(listener).await?,
        }
        Ok(())
    })
}

/// A running mock, wherever it runs; dropping it stops it.
pub enum Mock {
    Process {
        addr: SocketAddr,
        child: tokio::process::Child,
        /// Serving HTTPS, reached as `localhost`.
        tls: bool,
    },
    Thread {
        addr: SocketAddr,
        _stop: tokio::sync::oneshot::Sender<()>,
    },
}

impl Mock {
    /// Starts `exe mock` and reads its address from its first line of output.
    pub async fn start_process(exe: &Path) -> Result<Self> {
        let (child, addr) =
            crate::child::spawn_listening(exe, &["mock"], LISTENING, "the mock upstream").await?;
        Ok(Self::Process {
            addr,
            child,
            tls: false,
        })
    }

    /// Starts `exe mock --tls-ca CA`: HTTPS with HTTP/2, its certificate's PEM written to `ca`.
    pub async fn start_process_tls(exe: &Path, ca: &Path) -> Result<Self> {
        let ca_arg = ca.to_string_lossy();
        let (child, addr) = crate::child::spawn_listening(
            exe,
            &["mock", "--tls-ca", &ca_arg],
            LISTENING,
            "the HTTPS mock upstream",
        )
        .await?;
        Ok(Self::Process {
            addr,
            child,
            tls: true,
        })
    }

    /// Runs the mock on a thread of its own with its own single-threaded runtime.
    pub fn start_thread() -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("bench-mock".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("mock: cannot build a runtime: {e}");
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            eprintln!("mock: {e}");
                            return;
                        }
                    };
                    tokio::select! {
                        r = serve(listener) => if let Err(e) = r { eprintln!("mock: {e}") },
                        _ = stopped => {}
                    }
                });
            })?;
        Ok(Self::Thread { addr, _stop: stop })
    }

    pub fn addr(&self) -> SocketAddr {
        match self {
            Self::Process { addr, .. } | Self::Thread { addr, .. } => *addr,
        }
    }

    /// The OpenAI-style base URL (`…/v1`).
    pub fn base_url(&self) -> String {
        match self {
            Self::Process { tls: true, .. } => {
                format!("https://{}:{}/v1", crate::tls::HOST, self.addr().port())
            }
            _ => format!("http://{}/v1", self.addr()),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        match self {
            Self::Process { child, .. } => child.id(),
            Self::Thread { .. } => None,
        }
    }

    pub async fn stop(self) {
        if let Self::Process { mut child, .. } = self {
            // Ours to end: the child we spawned, by its handle.
            let _ = child.kill().await;
        }
    }
}
