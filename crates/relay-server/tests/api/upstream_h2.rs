//! Legs to an HTTPS provider that offers HTTP/2, as OpenAI, Anthropic and Gemini do: the leg goes
//! out on HTTP/2, the provider's certificate is trusted through `ca_file`, and legs past a
//! connection's `streams_per_connection` open another connection instead of waiting.

use std::collections::HashSet;
use std::convert::Infallible;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use futures::StreamExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use relay_server::config::{Config, ModelConfig, ProviderConfig, ProviderKind};
use serde_json::Value;

use crate::agent::user_says;
use crate::fake_upstream as up;
use crate::helpers::{TestApp, open_config};

/// A TLS upstream (a test double) offering `h2` and `http/1.1`, whose HTTP/2 side allows
/// `max_streams` streams a connection. `bench-slow` answers one chunk and stays open; any other
/// model answers "ok" at once. It records each request's connection and HTTP version.
struct TlsUpstream {
    port: u16,
    ca_pem: String,
    seen: Arc<Mutex<Vec<(usize, axum::http::Version)>>>,
}

impl TlsUpstream {
    async fn start(max_streams: u32) -> Self {
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        let ca_pem = cert.cert.pem();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let mut tls = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .unwrap();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = AtomicUsize::new(0);
        let recorded = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let id = connections.fetch_add(1, Ordering::Relaxed);
                let (acceptor, seen) = (acceptor.clone(), recorded.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let seen = seen.clone();
                        async move { Ok::<_, Infallible>(answer(id, req, &seen).await) }
                    });
                    let mut builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    builder.http2().max_concurrent_streams(max_streams);
                    let _ = builder.serve_connection(TokioIo::new(tls), service).await;
                });
            }
        });
        Self { port, ca_pem, seen }
    }

    fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}/v1", self.port)
    }

    fn seen(&self) -> Vec<(usize, axum::http::Version)> {
        self.seen.lock().unwrap().clone()
    }
}

async fn answer(
    connection: usize,
    req: hyper::Request<hyper::body::Incoming>,
    seen: &Mutex<Vec<(usize, axum::http::Version)>>,
) -> hyper::Response<Body> {
    seen.lock().unwrap().push((connection, req.version()));
    let body = http_body_util::BodyExt::collect(req.into_body())
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let slow = String::from_utf8_lossy(&body).contains("\"bench-slow\"");
    let chunks: Vec<Result<String, Infallible>> = if slow {
        vec![Ok(up::text_chunk("thinking"))]
    } else {
        vec![
            Ok(up::text_chunk("ok")),
            Ok(up::finish("stop")),
            Ok("data: [DONE]\n\n".to_owned()),
        ]
    };
    let stream = futures::stream::iter(chunks);
    let body = if slow {
        Body::from_stream(stream.chain(futures::stream::pending()))
    } else {
        Body::from_stream(stream)
    };
    hyper::Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

fn with_tls_provider(
    mut c: Config,
    up: &TlsUpstream,
    ca: Option<&Path>,
    per_conn: usize,
) -> Config {
    c.providers = vec![ProviderConfig {
        base_url: Some(up.base_url()),
        ca_file: ca.map(Path::to_path_buf),
        streams_per_connection: per_conn,
        ..ProviderConfig::new("tls", ProviderKind::Openai)
    }];
    c.models = ["fast", "bench-slow"]
        .into_iter()
        .map(|m| ModelConfig {
            name: m.into(),
            provider: "tls".into(),
            upstream: m.into(),
            ..Default::default()
        })
        .collect();
    c.routing.auto = vec!["fast".into()];
    c.routing.retries = 0;
    c.limits.agent_burst = 1_000;
    c
}

async fn app_for(up: &TlsUpstream, trusted: bool, per_conn: usize) -> TestApp {
    let ca_pem = up.ca_pem.clone();
    TestApp::spawn_with(move |dir| {
        let ca = dir.join("provider-ca.pem");
        std::fs::write(&ca, &ca_pem).unwrap();
        let ca = trusted.then_some(ca.as_path());
        with_tls_provider(open_config(dir), up, ca, per_conn)
    })
    .await
}

#[tokio::test]
async fn a_leg_reaches_an_https_provider_over_http2_trusting_its_ca_file() {
    let upstream = TlsUpstream::start(100).await;
    let app = app_for(&upstream, true, 100).await;
    let (status, lines) = app.leg(None, &user_says("hello")).await;
    assert_eq!(status, 200);
    let texts: Vec<&str> = lines.iter().filter_map(|l| l["text"].as_str()).collect();
    assert_eq!(texts, ["ok"], "{lines:?}");
    assert_eq!(lines.last().unwrap()["event"], "done", "{lines:?}");
    assert_eq!(upstream.seen(), [(0, axum::http::Version::HTTP_2)]);
}

#[tokio::test]
async fn without_the_ca_file_the_providers_certificate_is_not_trusted() {
    let upstream = TlsUpstream::start(100).await;
    let app = app_for(&upstream, false, 100).await;
    let (status, lines) = app.leg(None, &user_says("hello")).await;
    // The handshake fails, so the only model cannot be reached and no request got through.
    let answer: &Value = &lines[0];
    assert_eq!(status, 503, "{lines:?}");
    assert_eq!(answer["error"], "provider_unavailable", "{lines:?}");
    assert!(upstream.seen().is_empty());
}

/// Reads a leg's lines until its first `text` line; the leg then stays open.
async fn open_leg(app: &TestApp) -> reqwest::Response {
    let leg = serde_json::json!({
        "model": "bench-slow",
        "messages": [{"role": "user", "content": "think"}],
    });
    let mut r = app.post("/v1/agent/stream", None, &leg).await;
    assert_eq!(r.status(), 200);
    let mut head = String::new();
    while !head.contains("\"text\"") {
        let chunk = r
            .chunk()
            .await
            .unwrap()
            .expect("the leg ended before its text");
        head.push_str(&String::from_utf8_lossy(&chunk));
    }
    r
}

#[tokio::test]
async fn legs_past_a_connections_streams_go_out_on_another_connection() {
    // The upstream allows 2 streams a connection and Relay puts at most 2 on one: with a single
    // shared connection the third open leg would wait for one of the first two to end.
    let upstream = TlsUpstream::start(2).await;
    let app = app_for(&upstream, true, 2).await;
    let mut open = Vec::new();
    for _ in 0..5 {
        let leg = tokio::time::timeout(Duration::from_secs(10), open_leg(&app))
            .await
            .expect("an open leg waited for a free stream");
        open.push(leg);
    }
    let seen = upstream.seen();
    assert_eq!(seen.len(), 5);
    assert!(seen.iter().all(|(_, v)| *v == axum::http::Version::HTTP_2));
    let connections: HashSet<usize> = seen.iter().map(|(c, _)| *c).collect();
    assert_eq!(connections.len(), 3, "{seen:?}");
    drop(open);
}
