//! A hostile plain-HTTP provider written byte by byte on a raw socket (issue 31, point 2): a
//! 16 MB `data:` event, an endless line, a flood of `:` comments. Each leg must end with one
//! terminal line, and meanwhile another user's `/healthz` and leg must complete. Timings are not
//! asserted here; `hostile_stream_timings` (ignored, run by hand) prints them for RELIABILITY.md.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::agent::{assert_one_terminal, user_says};
use crate::fake_upstream as up;
use crate::helpers::{TestApp, open_config};

/// What the raw provider does after the first text piece, chosen by the request's model.
#[derive(Clone, Copy)]
enum Hostile {
    /// One `data:` line of 16 MB, then its end.
    BigEvent,
    /// Bytes without a line end, for as long as the socket takes them (at most 8 s).
    EndlessLine,
    /// `: ping` lines, for as long as the socket takes them (at most 8 s).
    Comments,
}

fn hostile_of(model: &str) -> Option<Hostile> {
    match model {
        "up-big" => Some(Hostile::BigEvent),
        "up-line" => Some(Hostile::EndlessLine),
        "up-comments" => Some(Hostile::Comments),
        _ => None,
    }
}

/// Starts the raw provider: a close-delimited SSE answer per connection.
async fn raw_provider() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    addr
}

/// Reads one request (head and `Content-Length` body) and returns its JSON body.
async fn read_request(stream: &mut TcpStream) -> Option<Value> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if data.len() >= end + 4 + len {
                return serde_json::from_slice(&data[end + 4..end + 4 + len]).ok();
            }
        }
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
}

async fn serve(mut stream: TcpStream) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let model = request["model"].as_str().unwrap_or_default().to_owned();
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let mut out = head.as_bytes().to_vec();
    out.extend_from_slice(up::text_chunk("first").as_bytes());
    if stream.write_all(&out).await.is_err() {
        return;
    }
    let Some(hostile) = hostile_of(&model) else {
        let rest = up::finish("stop") + "data: [DONE]\n\n";
        let _ = stream.write_all(rest.as_bytes()).await;
        return;
    };
    let until = Instant::now() + Duration::from_secs(8);
    let piece: Vec<u8> = match hostile {
        Hostile::BigEvent | Hostile::EndlessLine => vec![b'x'; 64 * 1024],
        Hostile::Comments => b": ping\n".repeat(64 * 1024 / 7),
    };
    if matches!(hostile, Hostile::BigEvent) {
        let mut sent = 0;
        let _ = stream.write_all(b"data: ").await;
        while sent < 16 * 1024 * 1024 {
            if stream.write_all(&piece).await.is_err() {
                return;
            }
            sent += piece.len();
        }
        let _ = stream.write_all(b"\n\n").await;
        return;
    }
    while Instant::now() < until {
        if stream.write_all(&piece).await.is_err() {
            return;
        }
    }
}

/// An open-mode app whose models `m-big`, `m-line`, `m-comments` and `m-ok` are on the raw
/// provider; idle legs end after `idle_ms`.
async fn hostile_app(idle_ms: u64) -> TestApp {
    let addr = raw_provider().await;
    TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.providers = vec![ProviderConfig {
            base_url: Some(format!("http://{addr}/v1")),
            ..ProviderConfig::new("raw", ProviderKind::Openai)
        }];
        c.models = ["big", "line", "comments", "ok"]
            .iter()
            .map(|n| ModelConfig {
                name: format!("m-{n}"),
                provider: "raw".into(),
                upstream: format!("up-{n}"),
                ..Default::default()
            })
            .collect();
        c.routing.auto = vec!["m-ok".into()];
        c.routing.retries = 0;
        c.routing.idle_timeout_ms = idle_ms;
        c.limits.agent_burst = 1_000;
        c
    })
    .await
}

fn leg_on(model: &str) -> Value {
    let mut leg = user_says("hi");
    leg["model"] = json!(model);
    leg
}

/// While a hostile leg runs: `/healthz` answers and an ordinary leg ends with `done`. Returns the
/// hostile leg's lines and the bystanders' times (for the printed figures only).
async fn with_bystanders(app: &TestApp, model: &str) -> (Vec<Value>, Duration, Duration) {
    let hostile_leg = leg_on(model);
    let hostile = app.leg(None, &hostile_leg);
    let bystanders = async {
        let started = Instant::now();
        let health = app.get("/healthz", None).await;
        assert_eq!(health.status(), StatusCode::OK);
        let health_time = started.elapsed();
        let started = Instant::now();
        let (code, lines) = app.leg(None, &leg_on("m-ok")).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(assert_one_terminal(&lines)["event"], "done", "{lines:?}");
        (health_time, started.elapsed())
    };
    let ((code, lines), (health, leg)) = tokio::join!(hostile, bystanders);
    assert_eq!(code, StatusCode::OK, "{lines:?}");
    (lines, health, leg)
}

#[tokio::test]
async fn a_16_mb_event_ends_the_leg_with_one_error_line() {
    let app = hostile_app(60_000).await;
    let (lines, _, _) = with_bystanders(&app, "m-big").await;
    assert_eq!(lines[1]["text"], "first");
    let last = assert_one_terminal(&lines);
    assert_eq!(last["event"], "error");
    assert_eq!(last["error"], "upstream_event_too_large");
    assert_eq!(last["retryable"], false);
    assert!(
        last["message"].as_str().unwrap().contains("4194304 bytes"),
        "{last}"
    );
}

#[tokio::test]
async fn an_endless_line_ends_the_leg_at_the_cap() {
    let app = hostile_app(60_000).await;
    let (lines, _, _) = with_bystanders(&app, "m-line").await;
    let last = assert_one_terminal(&lines);
    assert_eq!(last["error"], "upstream_event_too_large", "{last}");
}

#[tokio::test]
async fn a_comment_flood_is_silence_and_meets_the_idle_timeout() {
    // The flood lasts 8 s; comments do not reset the idle timeout, so the leg ends after 1.5 s.
    let app = hostile_app(1_500).await;
    let (lines, _, _) = with_bystanders(&app, "m-comments").await;
    let last = assert_one_terminal(&lines);
    // Had comments reset the timer, the leg would have outlived the flood and ended with the
    // provider's close ("ended without a finish") instead.
    assert_eq!(last["error"], "upstream_error", "{last}");
    assert_eq!(last["message"], "the provider stopped sending data");
}

#[tokio::test]
async fn a_too_large_event_on_chat_completions_is_an_error_in_openai_shape() {
    let app = hostile_app(60_000).await;
    let r = app
        .post(
            "/v1/chat/completions",
            None,
            &json!({"model": "m-big", "stream": true,
                    "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let text = r.text().await.unwrap();
    assert!(text.contains("upstream_event_too_large"), "{text}");
}

/// The figures in RELIABILITY.md: `cargo test -p relay-server --release --test api
/// hostile_stream_timings -- --ignored --nocapture` (a debug build gives larger figures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints timings for RELIABILITY.md; run by hand"]
async fn hostile_stream_timings() {
    for (model, idle) in [("m-big", 60_000), ("m-line", 60_000), ("m-comments", 1_500)] {
        let app = hostile_app(idle).await;
        let started = Instant::now();
        let (lines, health, leg) = with_bystanders(&app, model).await;
        println!(
            "{model}: hostile leg {:?} ({}), /healthz {health:?}, other leg {leg:?}",
            started.elapsed(),
            lines.last().unwrap()["error"]
        );
    }
}
