//! A same-family call that does not stream gets the provider's whole answer as the provider sent
//! it (issue 39, point 4): Relay asks the provider for a whole answer (`stream: false`, and no
//! `stream_options` for Chat Completions, which OpenAI refuses without a stream), and the JSON
//! document reaches the client byte for byte, through `POST /v1/messages`, `POST
//! /v1/chat/completions` and `POST /v1/responses`, while the ledger's record carries the
//! provider's own usage. A call in it that repeats one of the history's ids is still fixed.

use std::sync::{Arc, Mutex};

use axum::routing::post;
use relay_server::config::ProviderKind;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::same_family_bytes::relay;

/// What the provider was last sent.
type Seen = Arc<Mutex<Option<Value>>>;

/// A provider that answers `route` with the JSON document `answer` (its bytes as written here,
/// spacing and key order included), remembering the request body.
async fn upstream(route: &'static str, answer: &'static str) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let kept = seen.clone();
    let app = axum::Router::new().route(
        route,
        post(move |body: axum::Json<Value>| {
            *kept.lock().unwrap() = Some(body.0);
            async move {
                axum::response::Response::builder()
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(answer))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

async fn whole(res: reqwest::Response) -> String {
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    res.text().await.unwrap()
}

/// Anthropic's answer, with fields Relay's own encoding does not have.
const MESSAGE: &str = r#"{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Paris is sunny.","citations":null},{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"city":"Berlin"}}],"stop_reason":"tool_use","stop_sequence":null,"container":null,"usage":{"input_tokens":412,"cache_creation_input_tokens":0,"cache_read_input_tokens":1024,"output_tokens":57,"service_tier":"standard","server_tool_use":null}}"#;

#[tokio::test]
async fn a_messages_client_that_does_not_stream_gets_the_providers_message_byte_for_byte() {
    let (base, seen) = upstream("/v1/messages", MESSAGE).await;
    let app = relay(ProviderKind::Anthropic, base).await;
    let req = json!({"model": "m", "max_tokens": 256,
        "messages": [{"role": "user", "content": "weather in Paris and Berlin?"}]});
    assert_eq!(
        whole(app.post("/v1/messages", None, &req).await).await,
        MESSAGE
    );
    let sent = seen.lock().unwrap().clone().unwrap();
    assert_eq!(
        (&sent["stream"], &sent["model"]),
        (&json!(false), &json!("up"))
    );
    // The record: the provider's count (412 + 1,024 read in, 57 out), not an estimate.
    let legs = app.settled_legs(None, 1).await;
    assert_eq!(
        (&legs[0]["input_tokens"], &legs[0]["output_tokens"]),
        (&json!(1436), &json!(57)),
        "{legs:?}"
    );
    assert_eq!(legs[0]["estimated"], json!(false), "{legs:?}");
    // A call that repeats an id of the conversation's history is renamed, and only then is
    // the answer re-encoded.
    let req = json!({"model": "m", "max_tokens": 256, "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "sunny"}]}]});
    let got: Value =
        serde_json::from_str(&whole(app.post("/v1/messages", None, &req).await).await).unwrap();
    assert_eq!(got["content"][1]["id"], "toolu_01A09q90qw90lq917835lq9_2");
    assert_eq!(got["container"], Value::Null);
    assert_eq!(got["id"], "msg_01XFDUDYJgAACzvnptvVoYEL");
}

const COMPLETION: &str = r#"{
  "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
  "object": "chat.completion",
  "created": 1741570283,
  "model": "gpt-4.1-2025-04-14",
  "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "Hello there.", "refusal": null, "annotations": []},
     "logprobs": null, "finish_reason": "stop"}
  ],
  "usage": {"prompt_tokens": 19, "completion_tokens": 4, "total_tokens": 23,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0}},
  "service_tier": "default",
  "system_fingerprint": "fp_06737a9306"
}"#;

#[tokio::test]
async fn a_chat_client_that_does_not_stream_gets_the_providers_completion_byte_for_byte() {
    let (base, seen) = upstream("/v1/chat/completions", COMPLETION).await;
    let app = relay(ProviderKind::Openai, format!("{base}/v1")).await;
    let req =
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "logprobs": false});
    assert_eq!(
        whole(app.post("/v1/chat/completions", None, &req).await).await,
        COMPLETION
    );
    let sent = seen.lock().unwrap().clone().unwrap();
    assert_eq!(sent["stream"], json!(false));
    assert!(sent.get("stream_options").is_none(), "{sent}");
    let legs = app.settled_legs(None, 1).await;
    assert_eq!(
        (&legs[0]["input_tokens"], &legs[0]["output_tokens"]),
        (&json!(19), &json!(4)),
        "{legs:?}"
    );
}

const RESPONSE: &str = r#"{"id":"resp_67ccd3a9da748190baa7f1570fe91ac6","object":"response","created_at":1741476777,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[{"type":"message","id":"msg_67ccd3acc8d48190a77525dc6de64b41","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Done.","annotations":[]}]},{"type":"function_call","id":"fc_12345xyz","call_id":"call_12345xyz","name":"shell","arguments":"{\"cmd\":\"ls\"}","status":"completed"}],"parallel_tool_calls":true,"store":false,"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":0},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":380}}"#;

#[tokio::test]
async fn a_responses_client_that_does_not_stream_gets_the_providers_response_byte_for_byte() {
    let (base, seen) = upstream("/v1/responses", RESPONSE).await;
    let app = relay(ProviderKind::OpenaiResponses, format!("{base}/v1")).await;
    let req = json!({"model": "m", "store": false, "input": "list the files"});
    assert_eq!(
        whole(app.post("/v1/responses", None, &req).await).await,
        RESPONSE
    );
    assert_eq!(
        seen.lock().unwrap().clone().unwrap()["stream"],
        json!(false)
    );
    let legs = app.settled_legs(None, 1).await;
    assert_eq!(
        (&legs[0]["input_tokens"], &legs[0]["output_tokens"]),
        (&json!(328), &json!(52)),
        "{legs:?}"
    );
}

#[tokio::test]
async fn a_whole_answer_that_is_not_json_is_a_provider_error() {
    let (base, _) = upstream("/v1/messages", "event: message_start\ndata: {}\n\n").await;
    let app = relay(ProviderKind::Anthropic, base).await;
    let req =
        json!({"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]});
    let res = app.post("/v1/messages", None, &req).await;
    assert!(res.status().is_server_error(), "{}", res.status());
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["type"], "error", "{body}");
}
