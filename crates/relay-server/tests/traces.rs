//! Traces over OTLP/HTTP: one agent leg, with a caller's `traceparent`, exported to a small
//! OTLP receiver (axum on port 0 decoding the protobuf with `opentelemetry-proto`). The spans
//! continue the caller's trace, hang under the request span, carry the GenAI attributes, and the
//! provider is sent a `traceparent` of the same trace.
//!
//! Its own test binary: it installs the process-wide `tracing` subscriber.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind, TelemetryConfig};
use relay_server::{Config, Relay};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// What the receiver got: every span, with its resource's `service.name`.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

async fn collector() -> (String, Received) {
    async fn export(State(got): State<Received>, body: Bytes) -> &'static str {
        let request = ExportTraceServiceRequest::decode(body).unwrap();
        for rs in request.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref())
                .and_then(|v| match &v.value {
                    Some(AnyValue::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    got.lock().unwrap().push((service.clone(), span));
                }
            }
        }
        ""
    }
    let got = Received::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(export))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got)
}

/// An OpenAI-compatible provider double that answers "hi" and records each request's `traceparent`.
async fn provider() -> (String, Arc<Mutex<Vec<String>>>) {
    async fn answer(
        State(seen): State<Arc<Mutex<Vec<String>>>>,
        headers: HeaderMap,
    ) -> axum::response::Response {
        let tp = headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        seen.lock().unwrap().push(tp.to_owned());
        let chunks = [
            json!({"choices": [{"index": 0, "delta": {"content": "hi"}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}),
        ];
        let body: String = chunks
            .iter()
            .map(|c| format!("data: {c}\n\n"))
            .collect::<String>()
            + "data: [DONE]\n\n";
        axum::response::Response::builder()
            .header("content-type", "text/event-stream")
            .body(body.into())
            .unwrap()
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(answer))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a AnyValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn attr_str(span: &Span, key: &str) -> String {
    match attr(span, key) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        other => panic!("span {} has no attribute {key}: {other:?}", span.name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leg_is_traced_under_the_callers_trace_and_the_provider_gets_it() {
    let (collector_url, received) = collector().await;
    let (provider_url, traceparents) = provider().await;
    let telemetry = TelemetryConfig {
        otlp_endpoint: Some(collector_url),
        service_name: "relay-under-test".into(),
    };
    let (layer, exporter) = relay_server::telemetry::layer(&telemetry).unwrap().unwrap();
    tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::INFO)
        .with(layer)
        .init();

    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        telemetry,
        ..Config::default()
    };
    config.memory.url = format!("sqlite://{}", dir.path().join("relay.db").display());
    config.providers = vec![ProviderConfig {
        base_url: Some(provider_url),
        ..ProviderConfig::new("double", ProviderKind::Openai)
    }];
    config.models = vec![ModelConfig {
        name: "m".into(),
        provider: "double".into(),
        upstream: "gpt-x".into(),
        ..Default::default()
    }];
    let relay = Relay::from_config(config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(relay_server::serve(
        listener,
        relay.router(),
        std::future::pending(),
    ));

    let answer = reqwest::Client::new()
        .post(format!("{base}/v1/agent/stream"))
        .header("traceparent", format!("00-{TRACE_ID}-{CALLER_SPAN}-01"))
        .json(&json!({"model": "m", "project_id": "p1", "messages": [{"role": "user", "content": "hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let text = answer.text().await.unwrap();
    assert!(text.contains(r#""event":"done""#), "{text}");

    // The leg is over; export what is queued and wait for the receiver to have the stream span.
    let deadline = Instant::now() + Duration::from_secs(20);
    let spans = loop {
        let exporter_ref = &exporter;
        tokio::task::block_in_place(|| exporter_ref.flush());
        let spans = received.lock().unwrap().clone();
        let have = |name: &str| spans.iter().any(|(_, s)| s.name == name);
        if have("stream")
            && spans
                .iter()
                .any(|(_, s)| s.name.contains("/v1/agent/stream"))
        {
            break spans;
        }
        assert!(
            Instant::now() < deadline,
            "spans never arrived: {:?}",
            spans
                .iter()
                .map(|(_, s)| (&s.name, &s.attributes))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let find = |name: &str| {
        spans
            .iter()
            .map(|(_, s)| s)
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}"))
    };
    assert!(spans.iter().all(|(svc, _)| svc == "relay-under-test"));

    let request = find("POST /v1/agent/stream");
    assert_eq!(
        hex::encode(&request.trace_id),
        TRACE_ID,
        "the caller's trace is continued"
    );
    assert_eq!(hex::encode(&request.parent_span_id), CALLER_SPAN);
    assert_eq!(attr_str(request, "http.route"), "/v1/agent/stream");
    assert_eq!(attr_str(request, "http.response.status_code"), "200");

    let attempt = find("chat gpt-x");
    for child in [
        find("admission"),
        find("note_lookup"),
        attempt,
        find("stream"),
    ] {
        assert_eq!(hex::encode(&child.trace_id), TRACE_ID, "{}", child.name);
        assert_eq!(
            child.parent_span_id, request.span_id,
            "{} hangs under the request",
            child.name
        );
    }
    assert_eq!(attr_str(attempt, "gen_ai.request.model"), "gpt-x");
    assert_eq!(attr_str(attempt, "gen_ai.system"), "openai");
    assert_eq!(attr_str(attempt, "relay.model"), "m");
    assert_eq!(attr_str(attempt, "relay.provider"), "double");
    assert_eq!(attr_str(attempt, "relay.outcome"), "output");
    assert!(
        attr_str(attempt, "relay.time_to_first_output_ms")
            .parse::<f64>()
            .unwrap()
            > 0.0
    );
    let stream = find("stream");
    assert_eq!(attr_str(stream, "gen_ai.usage.input_tokens"), "7");
    assert_eq!(attr_str(stream, "gen_ai.usage.output_tokens"), "3");
    assert_eq!(attr_str(stream, "gen_ai.response.finish_reasons"), "stop");

    // The provider saw the attempt as the parent of its work, in the caller's trace.
    let seen = traceparents.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![format!(
            "00-{TRACE_ID}-{}-01",
            hex::encode(&attempt.span_id)
        )]
    );
}
