//! A same-family streamed answer reaches the client as the provider sent it (issue 39, point
//! 4): recorded provider streams served by a fake upstream, through `POST /v1/messages`, `POST
//! /v1/chat/completions` and `POST /v1/responses`, byte for byte, and the ledger's record carries
//! the provider's own usage.

use axum::routing::post;
use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, open_config};

/// A provider that answers `route` with `bytes`, whatever it is asked.
async fn upstream(route: &'static str, bytes: Vec<u8>) -> String {
    let app = axum::Router::new().route(
        route,
        post(move || {
            let bytes = bytes.clone();
            async move {
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(bytes))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// A relay whose one model `m` is a `kind` provider at `base_url`, its records written at once.
pub(crate) async fn relay(kind: ProviderKind, base_url: String) -> TestApp {
    TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.providers = vec![ProviderConfig {
            base_url: Some(base_url),
            ..ProviderConfig::new("p", kind)
        }];
        c.models = vec![ModelConfig {
            name: "m".into(),
            provider: "p".into(),
            upstream: "up".into(),
            ..Default::default()
        }];
        c.usage.flush_ms = 5;
        c
    })
    .await
}

async fn bytes_of(res: reqwest::Response) -> Vec<u8> {
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    res.bytes().await.unwrap().to_vec()
}

#[tokio::test]
async fn a_messages_client_gets_an_anthropic_providers_stream_byte_for_byte() {
    let sent = crate::helpers::fixture("anthropic/simonw-llm-anthropic__tools_parallel.0.sse");
    let app = relay(
        ProviderKind::Anthropic,
        upstream("/v1/messages", sent.clone()).await,
    )
    .await;
    let req = json!({"model": "m", "max_tokens": 256, "stream": true,
        "messages": [{"role": "user", "content": "weather in Paris and Berlin?"}]});
    let got = bytes_of(app.post("/v1/messages", None, &req).await).await;
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&sent)
    );
    assert_eq!(got, sent);
    // The record: the provider's count (542 in, 62 out), not an estimate.
    let legs = app.settled_legs(None, 1).await;
    assert_eq!(
        (&legs[0]["input_tokens"], &legs[0]["output_tokens"]),
        (&json!(542), &json!(62)),
        "{legs:?}"
    );
    assert_eq!(legs[0]["estimated"], json!(false), "{legs:?}");
}

#[tokio::test]
async fn a_chat_client_gets_an_openai_providers_stream_and_the_usage_chunk_only_if_it_asked() {
    let sent = crate::helpers::fixture("openai-chat/pydantic-ai__run_stream_sync_real_model.0.sse");
    let app = relay(
        ProviderKind::Openai,
        format!(
            "{}/v1",
            upstream("/v1/chat/completions", sent.clone()).await
        ),
    )
    .await;
    let mut req = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}]});
    let got = bytes_of(app.post("/v1/chat/completions", None, &req).await).await;
    assert_eq!(got, sent);
    // Relay asks for the usage chunk for its own ledger; a client that did not gets the rest of
    // the provider's bytes without it.
    req.as_object_mut().unwrap().remove("stream_options");
    let got = String::from_utf8(bytes_of(app.post("/v1/chat/completions", None, &req).await).await)
        .unwrap();
    let without_usage: String = String::from_utf8(sent)
        .unwrap()
        .split_inclusive("\n\n")
        .filter(|event| !event.contains("\"choices\":[]"))
        .collect();
    assert_eq!(got, without_usage);
    let legs = app.settled_legs(None, 2).await;
    for leg in &legs {
        assert_eq!(
            (&leg["input_tokens"], &leg["output_tokens"]),
            (&json!(53), &json!(15)),
            "{legs:?}"
        );
    }
}

#[tokio::test]
async fn a_responses_client_gets_a_responses_providers_stream_byte_for_byte() {
    let sent =
        crate::helpers::fixture("openai-responses/simonw-llm__responses_tool_use_streaming.0.sse");
    let app = relay(
        ProviderKind::OpenaiResponses,
        format!("{}/v1", upstream("/v1/responses", sent.clone()).await),
    )
    .await;
    let req = json!({"model": "m", "stream": true, "store": false,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]});
    let got = bytes_of(app.post("/v1/responses", None, &req).await).await;
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&sent)
    );
    let legs = app.settled_legs(None, 1).await;
    assert_eq!(legs[0]["estimated"], json!(false), "{legs:?}");
    assert!(legs[0]["input_tokens"].as_u64().unwrap() > 0, "{legs:?}");
}
