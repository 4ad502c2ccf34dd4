//! Agent legs when the upstream misbehaves: fallback before the headers, the refund, in-band
//! errors after them, keep-alive, idle timeout, and cancellation when the client leaves.

use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent::{assert_one_terminal, auth_app, open_app, user_says, with_fake};
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::{TestApp, body, expect_error, open_config};

fn status(code: u16) -> Reply {
    Reply::Status {
        status: code,
        body: json!({"error": {"type": "server_error", "message": "key sk-test-SECRET-123 rejected"}}),
        retry_after: None,
    }
}

#[tokio::test]
async fn a_failing_first_model_hands_the_leg_to_the_second() {
    let fake = FakeUpstream::start().await;
    fake.push("up-1", status(500));
    fake.push("up-2", up::text_reply(&["from m2"]));
    let app = open_app(&fake).await;
    let (code, lines) = app.leg(None, &user_says("hi")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(lines[0]["model"], "m2");
    assert_eq!(lines[1]["text"], "from m2");
    let models: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(models, ["up-1", "up-2"]);
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_on_the_same_model() {
    let fake = FakeUpstream::start().await;
    fake.push(
        "up-1",
        Reply::Status {
            status: 429,
            body: json!({}),
            retry_after: Some(1),
        },
    );
    let app = TestApp::spawn_with(|dir| {
        let mut c = with_fake(open_config(dir), &fake);
        c.routing.retries = 1;
        c
    })
    .await;
    let started = std::time::Instant::now();
    let (code, lines) = app.leg(None, &user_says("hi")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(lines[0]["model"], "m1", "the retry went to the same model");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "Retry-After was honoured"
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn when_every_model_fails_the_unit_is_given_back_and_the_error_is_json() {
    let fake = FakeUpstream::start().await;
    fake.push("up-1", status(503));
    fake.push("up-2", status(500));
    let app = auth_app(&fake, 10).await;
    let token = app.user("r@example.com").await;
    let r = app
        .post("/v1/agent/stream", Some(&token), &user_says("hi"))
        .await;
    let b = expect_error(r, 502, "upstream_error").await;
    assert!(
        !b.to_string().contains("SECRET"),
        "provider bodies are never echoed: {b}"
    );
    assert_eq!(
        body(app.me(Some(&token)).await).await["used"],
        0,
        "refunded"
    );

    fake.push(
        "up-1",
        Reply::Status {
            status: 429,
            body: json!({}),
            retry_after: Some(30),
        },
    );
    fake.push(
        "up-2",
        Reply::Status {
            status: 429,
            body: json!({}),
            retry_after: Some(30),
        },
    );
    let r = app
        .post("/v1/agent/stream", Some(&token), &user_says("hi"))
        .await;
    assert_eq!(r.headers()["retry-after"], "30");
    expect_error(r, 429, "rate_limited").await;
    assert_eq!(body(app.me(Some(&token)).await).await["used"], 0);
}

#[tokio::test]
async fn an_unreachable_provider_is_503_provider_unavailable() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let app = TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.providers = vec![relay_server::config::ProviderConfig {
            base_url: Some(format!("http://127.0.0.1:{port}/v1")),
            ..relay_server::config::ProviderConfig::new(
                "gone",
                relay_server::config::ProviderKind::Openai,
            )
        }];
        c.models = vec![relay_server::config::ModelConfig {
            name: "m".into(),
            provider: "gone".into(),
            upstream: "x".into(),
            ..Default::default()
        }];
        c.routing.retries = 0;
        c
    })
    .await;
    expect_error(
        app.post("/v1/agent/stream", None, &user_says("hi")).await,
        503,
        "provider_unavailable",
    )
    .await;
    assert_eq!(
        body(app.me(None).await).await["used"],
        0,
        "a failed leg is not a served leg"
    );
}

#[tokio::test]
async fn a_cut_mid_stream_ends_with_exactly_one_error_line() {
    let fake = FakeUpstream::start().await;
    fake.push("up-1", Reply::SseThenCut(vec![up::text_chunk("partial ")]));
    let app = auth_app(&fake, 10).await;
    let token = app.user("cut@example.com").await;
    let (code, lines) = app.leg(Some(&token), &user_says("hi")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(lines[1]["text"], "partial ");
    let last = assert_one_terminal(&lines);
    assert_eq!(last["event"], "error");
    assert_eq!(last["retryable"], true);
    assert!(last["error"].as_str().is_some() && last["message"].as_str().is_some());
    assert_eq!(
        body(app.me(Some(&token)).await).await["used"],
        1,
        "output was produced: no refund"
    );
}

#[tokio::test]
async fn a_quiet_upstream_gets_pings_and_then_an_idle_timeout_error() {
    let fake = FakeUpstream::start().await;
    fake.push("up-1", Reply::SseThenSilence(vec![up::text_chunk("first")]));
    let app = TestApp::spawn_with(|dir| {
        let mut c = with_fake(open_config(dir), &fake);
        c.routing.ping_interval_ms = 100;
        c.routing.idle_timeout_ms = 450;
        c
    })
    .await;
    let (_, lines) = app.leg(None, &user_says("hi")).await;
    let kinds: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(&kinds[..2], ["start", "text"]);
    assert!(
        kinds.iter().filter(|k| **k == "ping").count() >= 2,
        "{kinds:?}"
    );
    assert_eq!(
        lines.iter().find(|l| l["event"] == "ping").unwrap(),
        &json!({"event": "ping"})
    );
    let last = assert_one_terminal(&lines);
    assert_eq!(
        (last["event"].as_str(), last["error"].as_str()),
        (Some("error"), Some("upstream_error"))
    );
    fake.wait_dropped().await;
}

#[tokio::test]
async fn a_provider_that_never_sends_headers_hands_over_to_the_next_model() {
    let fake = FakeUpstream::start().await;
    fake.push("up-1", Reply::NoHeaders);
    let app = TestApp::spawn_with(|dir| {
        let mut c = with_fake(open_config(dir), &fake);
        c.routing.idle_timeout_ms = 300;
        c
    })
    .await;
    let (code, lines) = app.leg(None, &user_says("hi")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(lines[0]["model"], "m2");
}

#[tokio::test]
async fn a_client_that_disconnects_cancels_the_upstream_request() {
    let fake = FakeUpstream::start().await;
    fake.push("up-1", Reply::SseThenSilence(vec![up::text_chunk("hello")]));
    let app = open_app(&fake).await;
    let r = app.post("/v1/agent/stream", None, &user_says("hi")).await;
    let mut stream = r.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("\"text\"") {
        seen.push_str(std::str::from_utf8(&stream.next().await.unwrap().unwrap()).unwrap());
    }
    drop(stream);
    fake.wait_dropped().await;
    let metrics = wait_for_metric(&app, "relay_agent_active_streams 0").await;
    assert!(
        metrics.contains(r#"relay_agent_legs_total{model="m1",outcome="cancelled"} 1"#),
        "{metrics}"
    );
}

/// Reads `/metrics` until `needle` shows up (the body is dropped asynchronously after the client leaves).
async fn wait_for_metric(app: &TestApp, needle: &str) -> String {
    for _ in 0..200 {
        let text = app.get("/metrics", None).await.text().await.unwrap();
        if text.contains(needle) {
            return text;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("metrics never showed {needle}");
}

#[tokio::test]
async fn metrics_count_legs_tokens_and_return_active_streams_to_zero() {
    let fake = FakeUpstream::start().await;
    fake.push("up-1", up::text_reply(&["a"]));
    fake.push(
        "up-1",
        up::tool_call_reply("c1", "grep", r#"{"pattern":"x"}"#),
    );
    fake.push("up-1", Reply::SseThenCut(vec![up::text_chunk("b")]));
    let app = open_app(&fake).await;
    let tools = json!([{"name": "grep", "parameters": {"type": "object"}}]);
    app.leg(None, &user_says("1")).await;
    app.leg(
        None,
        &json!({"messages": [{"role": "user", "content": "2"}], "tools": tools}),
    )
    .await;
    app.leg(None, &user_says("3")).await;
    let text = app.get("/metrics", None).await.text().await.unwrap();
    for line in [
        r#"relay_agent_legs_total{model="m1",outcome="done"} 1"#,
        r#"relay_agent_legs_total{model="m1",outcome="tool_calls"} 1"#,
        r#"relay_agent_legs_total{model="m1",outcome="error"} 1"#,
        r#"relay_agent_tokens_total{model="m1",direction="in"} 32"#,
        r#"relay_agent_tokens_total{model="m1",direction="out"} 8"#,
        "relay_agent_active_streams 0",
        "relay_agent_upstream_first_output_seconds_count{model=\"m1\"} 3",
        "relay_agent_relay_overhead_seconds_count 3",
    ] {
        assert!(text.contains(line), "missing {line}\n{text}");
    }
}

#[tokio::test]
async fn every_line_is_flushed_as_it_is_produced() {
    let fake = FakeUpstream::start().await;
    fake.push(
        "up-1",
        Reply::Sse {
            chunks: vec![
                up::text_chunk("one"),
                up::text_chunk("two"),
                up::finish("stop"),
                up::DONE.into(),
            ],
            pause: Duration::from_millis(300),
        },
    );
    let app = open_app(&fake).await;
    let r = app.post("/v1/agent/stream", None, &user_says("hi")).await;
    let mut stream = r.bytes_stream();
    let started = std::time::Instant::now();
    let mut seen = String::new();
    while !seen.contains("\"one\"") {
        seen.push_str(std::str::from_utf8(&stream.next().await.unwrap().unwrap()).unwrap());
    }
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "the first text waited for later ones"
    );
    let rest: Vec<Value> = {
        let mut all = seen;
        while let Some(chunk) = stream.next().await {
            all.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
        all.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    assert_eq!(assert_one_terminal(&rest)["event"], "done");
}

#[tokio::test]
async fn malformed_sse_before_output_is_a_refunded_502_and_after_output_one_error_line() {
    let fake = FakeUpstream::start().await;
    fake.push(
        "up-1",
        Reply::Sse {
            chunks: vec!["data: {not json\n\n".into()],
            pause: Duration::ZERO,
        },
    );
    fake.push(
        "up-1",
        Reply::Sse {
            chunks: vec![up::text_chunk("fine so far"), "data: [[[\n\n".into()],
            pause: Duration::ZERO,
        },
    );
    let app = auth_app(&fake, 10).await;
    let token = app.user("m@example.com").await;
    let r = app
        .post("/v1/agent/stream", Some(&token), &user_says("hi"))
        .await;
    expect_error(r, 502, "upstream_error").await;
    assert_eq!(
        body(app.me(Some(&token)).await).await["used"],
        0,
        "no output: refunded"
    );
    let (code, lines) = app.leg(Some(&token), &user_says("hi")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(lines[1]["text"], "fine so far");
    assert_eq!(assert_one_terminal(&lines)["event"], "error");
    assert_eq!(body(app.me(Some(&token)).await).await["used"], 1);
}

#[tokio::test]
async fn a_single_huge_chunk_is_streamed_whole() {
    let fake = FakeUpstream::start().await;
    let huge = "é".repeat(1_000_000); // 2 MB of UTF-8 in one SSE event
    fake.push("up-1", up::text_reply(&[&huge]));
    let app = open_app(&fake).await;
    let (code, lines) = app.leg(None, &user_says("hi")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(lines[1]["text"].as_str().unwrap().len(), huge.len());
    assert_eq!(assert_one_terminal(&lines)["event"], "done");
}

#[tokio::test]
async fn a_storm_of_429s_and_500s_leaves_no_stream_open_and_every_leg_terminated() {
    let fake = FakeUpstream::start().await;
    for i in 0..30 {
        let reply = match i % 3 {
            0 => Reply::Status {
                status: 429,
                body: json!({}),
                retry_after: Some(60),
            },
            1 => status(500),
            _ => up::text_reply(&["ok"]),
        };
        fake.push(if i % 2 == 0 { "up-1" } else { "up-2" }, reply);
    }
    let app = auth_app(&fake, 1_000).await;
    let token = app.user("storm@example.com").await;
    let bodies = (0..20).map(|_| user_says("x")).collect();
    let mut served = 0;
    for (code, text) in app.concurrent_legs(&token, bodies).await {
        if code == StatusCode::OK {
            served += 1;
            let lines: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_one_terminal(&lines);
        } else {
            let b: Value = serde_json::from_str(&text).unwrap();
            assert!(
                ["rate_limited", "upstream_error"].contains(&b["error"].as_str().unwrap()),
                "{b}"
            );
        }
    }
    let used = body(app.me(Some(&token)).await).await["used"]
        .as_i64()
        .unwrap();
    assert_eq!(used, served, "exactly the served legs kept their unit");
    let metrics = app.get("/metrics", None).await.text().await.unwrap();
    assert!(
        metrics.contains("relay_agent_active_streams 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_non_streamed_compatible_call_cut_after_the_first_output_costs_nothing() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 10).await;
    let token = app.user("sdk@example.com").await;
    let app = &app;
    let token = &token;
    let used = || async move { body(app.me(Some(token)).await).await["used"].clone() };
    assert_eq!(used().await, 0);

    fake.push("up-1", Reply::SseThenCut(vec![up::text_chunk("partial ")]));
    let r = app
        .post(
            "/v1/chat/completions",
            Some(token),
            &json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert!(r.status().is_server_error(), "{}", r.status());
    assert_eq!(used().await, 0, "chat completions: the unit was given back");

    fake.push("up-1", Reply::SseThenCut(vec![up::text_chunk("partial ")]));
    let r = app
        .client
        .post(app.url("/v1/messages"))
        .bearer_auth(token)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "m1", "max_tokens": 16,
                      "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_server_error(), "{}", r.status());
    assert_eq!(used().await, 0, "messages: the unit was given back");

    // A streamed call that fails the same way delivered output: it keeps its unit.
    fake.push("up-1", Reply::SseThenCut(vec![up::text_chunk("partial ")]));
    let r = app
        .post(
            "/v1/chat/completions",
            Some(token),
            &json!({"model": "m1", "stream": true,
                    "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("partial "));
    assert_eq!(used().await, 1);
}
