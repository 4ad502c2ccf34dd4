//! The open-stream baseline: a bare streaming proxy with nothing of Relay between its two
//! connections, so the memory-per-stream row has a floor measured in the same run.
//!
//! It serves `POST /v1/agent/stream` on Relay's own connection server (`relay_server::http::server`,
//! the same hyper settings), sends the leg's model, messages and tools upstream as an OpenAI
//! request, and streams a `start` line and then each upstream chunk as one NDJSON line. No
//! accounts, quota, notes, routing, metrics or logs. Two upstream clients: reqwest on Relay's
//! provider lanes (`relay_server::providers::transport::lanes`, so over HTTPS legs share HTTP/2 connections
//! as Relay's do) and hyper's own HTTP/1 client connection, one per leg with no pool (the least
//! hyper allows; plain HTTP only).
//! It runs as its own process (`relay-bench-floor`, jemalloc like `relay`) so its RSS is its own.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use clap::ValueEnum;
use futures::{Stream, StreamExt};
use hyper_util::rt::TokioIo;
use relay_server::config::DEFAULT_STREAMS_PER_CONNECTION;
use relay_server::providers::transport::lanes::{ClientSettings, Lanes, Lease};
use serde_json::{Value, json};

/// The first line the floor prints: this, then its address.
const LISTENING: &str = "floor listening on ";

/// How the floor reaches the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum Client {
    /// reqwest with its connection pool, as Relay's providers do.
    Reqwest,
    /// hyper's HTTP/1 client connection, one per leg, no pool.
    Hyper,
    /// Relay's own HTTP/1.1 connections (`providers::transport::plain`), as Relay reaches `http://` providers.
    Plain,
}

impl Client {
    pub fn describe(self) -> &'static str {
        match self {
            Self::Reqwest => {
                "reqwest upstream on Relay's provider lanes (Relay's client for https providers)"
            }
            Self::Hyper => "hyper's own client connection upstream, no pool",
            Self::Plain => {
                "Relay's own HTTP/1.1 connections upstream (Relay's client for http providers)"
            }
        }
    }
}

#[derive(Clone)]
struct Upstream {
    /// `http://host:port/v1`.
    base: String,
    client: Client,
    lanes: Arc<Lanes>,
}

/// The proxy's routes, sending upstream to `base` (an OpenAI-style `http://host:port/v1` or
/// `https://…`, trusting `ca_file` when given).
pub fn router(base: String, client: Client, ca_file: Option<&Path>) -> Result<axum::Router> {
    let settings = match ca_file {
        Some(path) => ClientSettings::with_ca_file(path)?,
        None => ClientSettings::system()?,
    };
    let upstream = Upstream {
        base,
        client,
        lanes: Arc::new(Lanes::new(settings, DEFAULT_STREAMS_PER_CONNECTION)?),
    };
    Ok(axum::Router::new()
        .route("/v1/agent/stream", post(leg))
        .route("/v1/messages", post(messages))
        .with_state(upstream))
}

async fn leg(axum::extract::State(up): axum::extract::State<Upstream>, body: Bytes) -> Response {
    let Ok(leg) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "the body is not JSON").into_response();
    };
    let request = json!({
        "model": leg["model"],
        "stream": true,
        "messages": leg["messages"],
        "tools": leg["tools"],
    })
    .to_string();
    let chunks = match up.client {
        Client::Reqwest => via_reqwest(&up, request).await.map(StreamExt::boxed),
        Client::Hyper => via_hyper(&up.base, request).await.map(StreamExt::boxed),
        Client::Plain => via_plain(&up, request).await.map(StreamExt::boxed),
    };
    match chunks {
        Ok(chunks) => ndjson(chunks),
        Err(e) => (StatusCode::BAD_GATEWAY, format!("{e:#}")).into_response(),
    }
}

/// `POST /v1/messages` forwarded as it is: the client's bytes upstream (`…/v1/messages` of the
/// same origin) on Relay's own HTTP/1.1 connections, the answer's bytes back as they arrive. The
/// floor of the door rows (`crate::doors`), the least a same-family proxy can do.
async fn messages(
    axum::extract::State(up): axum::extract::State<Upstream>,
    body: Bytes,
) -> Response {
    let forwarded = async {
        let url = reqwest::Url::parse(&format!("{}/messages", up.base))?;
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        );
        let answer = up
            .lanes
            .plain()
            .post(&url, headers, body.to_vec())
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        anyhow::ensure!(answer.status.is_success(), "upstream {}", answer.status);
        anyhow::Ok(answer.body)
    };
    match forwarded.await {
        Ok(chunks) => {
            let body = chunks
                .take_while(|c| std::future::ready(c.is_ok()))
                .filter_map(|c| std::future::ready(c.ok().map(Ok::<Bytes, Infallible>)));
            let mut response = Response::new(Body::from_stream(body));
            response.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("text/event-stream"),
            );
            response
        }
        Err(e) => (StatusCode::BAD_GATEWAY, format!("{e:#}")).into_response(),
    }
}

async fn via_reqwest(
    up: &Upstream,
    request: String,
) -> Result<impl Stream<Item = Option<Bytes>> + Send + 'static> {
    let (http, lease): (reqwest::Client, Lease) = up.lanes.lease()?;
    let response = http
        .post(format!("{}/chat/completions", up.base))
        .header("content-type", "application/json")
        .body(request)
        .send()
        .await?
        .error_for_status()?;
    // The leg keeps its place on the lane while its body streams, as in Relay.
    Ok(response.bytes_stream().map(move |chunk| {
        let _ = &lease;
        chunk.ok()
    }))
}

async fn via_hyper(
    base: &str,
    request: String,
) -> Result<impl Stream<Item = Option<Bytes>> + Send + 'static> {
    let uri: axum::http::Uri = format!("{base}/chat/completions").parse()?;
    let authority = uri
        .authority()
        .context("no host in the upstream URL")?
        .clone();
    let tcp = tokio::net::TcpStream::connect(authority.as_str()).await?;
    tcp.set_nodelay(true)?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake::<_, http_body_util::Full<Bytes>>(TokioIo::new(tcp))
            .await?;
    tokio::spawn(connection);
    let request = hyper::Request::post(uri.path())
        .header("host", authority.as_str())
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(Bytes::from(request)))?;
    let response = sender.send_request(request).await?;
    anyhow::ensure!(
        response.status().is_success(),
        "upstream {}",
        response.status()
    );
    let frames = http_body_util::BodyStream::new(response.into_body());
    Ok(frames.map(|frame| frame.ok().and_then(|f| f.into_data().ok())))
}

async fn via_plain(
    up: &Upstream,
    request: String,
) -> Result<impl Stream<Item = Option<Bytes>> + Send + 'static> {
    let url = reqwest::Url::parse(&format!("{}/chat/completions", up.base))?;
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    let answer = up
        .lanes
        .plain()
        .post(&url, headers, request.into_bytes())
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    anyhow::ensure!(answer.status.is_success(), "upstream {}", answer.status);
    Ok(answer.body.map(Result::ok))
}

/// A `start` line, then each upstream chunk as a `text` line; a broken upstream ends the body.
fn ndjson(chunks: impl Stream<Item = Option<Bytes>> + Send + 'static) -> Response {
    let start =
        futures::stream::once(async { Some(Bytes::from_static(b"{\"event\":\"start\"}\n")) });
    let lines = chunks.map(|chunk| {
        chunk.map(|c| {
            let mut line = serde_json::to_vec(&json!({
                "event": "text",
                "text": String::from_utf8_lossy(&c),
            }))
            .unwrap_or_default();
            line.push(b'\n');
            Bytes::from(line)
        })
    });
    let body = start
        .chain(lines)
        .take_while(|line| std::future::ready(line.is_some()))
        .filter_map(|line| std::future::ready(line.map(Ok::<Bytes, Infallible>)));
    Response::new(Body::from_stream(body))
}

/// The floor's process mode: the address on standard output, then serve until killed.
pub async fn run_process(upstream: String, client: Client, ca_file: Option<PathBuf>) -> Result<()> {
    let router = router(upstream, client, ca_file.as_deref())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{LISTENING}{}", listener.local_addr()?);
    relay_server::serve(listener, router, std::future::pending::<()>()).await?;
    Ok(())
}

/// A running floor process; dropping it kills it.
pub struct Floor {
    pub addr: std::net::SocketAddr,
    pub pid: u32,
    _child: tokio::process::Child,
}

impl Floor {
    /// Starts `exe --upstream BASE --client CLIENT [--ca-file CA]` and reads its address from its
    /// first line.
    pub async fn start(
        exe: &Path,
        upstream: &str,
        client: Client,
        ca_file: Option<&Path>,
    ) -> Result<Self> {
        let client_arg = client
            .to_possible_value()
            .context("every client has a name")?;
        let mut args = vec!["--upstream", upstream, "--client", client_arg.get_name()];
        let ca_arg = ca_file.map(|p| p.to_string_lossy().into_owned());
        if let Some(ca) = &ca_arg {
            args.extend(["--ca-file", ca]);
        }
        let (child, addr) =
            crate::child::spawn_listening(exe, &args, LISTENING, "the bare proxy").await?;
        let pid = child.id().context("the bare proxy exited at once")?;
        Ok(Self {
            addr,
            pid,
            _child: child,
        })
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// The open-stream baseline with one upstream client: starts the floor in front of `upstream`,
/// runs 20 ordinary legs (as Relay gets before its figure), then holds `n` slow legs open exactly
/// as the Relay row does and reads the floor's RSS.
pub async fn measure(
    exe: &Path,
    upstream: &str,
    client: Client,
    ca_file: Option<&Path>,
    n: usize,
) -> Result<crate::streams::StreamsResult> {
    let floor = Floor::start(exe, upstream, client, ca_file).await?;
    let base = floor.base();
    let http = reqwest::Client::new();
    let leg = crate::data::relay_leg(crate::data::FAST_MODEL, crate::data::PROJECT).to_string();
    for _ in 0..20 {
        let answer = http
            .post(format!("{base}/v1/agent/stream"))
            .header("content-type", "application/json")
            .body(leg.clone())
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        anyhow::ensure!(
            answer.starts_with("{\"event\":\"start\"}") && answer.contains("[DONE]"),
            "the bare proxy's warm-up leg did not stream the whole answer: {answer}"
        );
    }
    let sockets = crate::streams::Sockets::for_upstream(upstream);
    crate::streams::hold_open(&base, "", n, floor.pid, sockets).await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn serve_floor(client: Client, upstream: String) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(relay_server::serve(
            listener,
            router(upstream, client, None).unwrap(),
            std::future::pending::<()>(),
        ));
        format!("http://{addr}/v1/agent/stream")
    }

    #[tokio::test]
    async fn both_clients_stream_the_upstream_answer_after_a_start_line() {
        let mock = crate::mock::Mock::start_thread().unwrap();
        let leg = crate::data::relay_leg(crate::data::FAST_MODEL, crate::data::PROJECT);
        for client in [Client::Reqwest, Client::Hyper, Client::Plain] {
            let url = serve_floor(client, mock.base_url()).await;
            let answer = reqwest::Client::new()
                .post(&url)
                .json(&leg)
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 200, "{client:?}");
            let text = answer.text().await.unwrap();
            let lines: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(lines[0], json!({"event": "start"}), "{client:?}");
            let upstream: String = lines[1..]
                .iter()
                .map(|l| l["text"].as_str().unwrap())
                .collect();
            assert!(upstream.contains("chat.completion.chunk"), "{upstream}");
            assert!(upstream.ends_with("data: [DONE]\n\n"), "{upstream}");
        }
    }

    #[tokio::test]
    async fn a_body_that_is_not_json_is_a_400_and_an_unreachable_upstream_a_502() {
        let url = serve_floor(Client::Hyper, "http://127.0.0.1:1/v1".into()).await;
        let http = reqwest::Client::new();
        let bad = http.post(&url).body("{").send().await.unwrap();
        assert_eq!(bad.status(), 400);
        let leg = crate::data::relay_leg(crate::data::FAST_MODEL, crate::data::PROJECT);
        let down = http.post(&url).json(&leg).send().await.unwrap();
        assert_eq!(down.status(), 502);
    }
}
