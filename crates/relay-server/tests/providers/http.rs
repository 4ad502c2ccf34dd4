//! Each adapter over real HTTP, against a fake upstream that serves recorded bytes.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use relay_server::providers::anthropic::AnthropicProvider;
use relay_server::providers::gemini::GeminiProvider;
use relay_server::providers::openai::OpenAiProvider;
use relay_server::providers::transport::lanes::{ClientSettings, Lanes};
use relay_server::providers::{
    ChatMessage, ChatRequest, Provider, ProviderError, ProviderEvent, ToolChoice, ToolSpec,
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::cases::{HTTP_ERROR_FIXTURES, case};
use crate::{Adapter, call, fixture, outcome_of};

// ---------------------------------------------------------------------------------------------
// Over HTTP, against a fake upstream

/// What the fake upstream saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Value,
}

enum Reply {
    /// The recorded body, as `text/event-stream`.
    Sse(Vec<u8>),
    /// A status with headers and a JSON body.
    Error {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: Vec<u8>,
    },
    /// The first bytes, then nothing more until the client goes away; `dropped` fires when
    /// the server drops the body, i.e. when the connection is gone.
    Hang {
        first: Vec<u8>,
        dropped: Mutex<Option<oneshot::Sender<()>>>,
    },
}

struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    async fn start(reply: Reply) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let reply = Arc::new(reply);
        let router = axum::Router::new().fallback({
            let seen = seen.clone();
            move |uri: Uri, headers: HeaderMap, body: Bytes| {
                let seen = seen.clone();
                let reply = reply.clone();
                async move {
                    seen.lock().expect("lock").push(Seen {
                        path: uri.path().to_owned(),
                        query: uri.query().map(str::to_owned),
                        headers,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    });
                    respond(&reply)
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
        Self { addr, seen }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

/// Drops with the response body, so its `Drop` tells when the connection was given up.
struct Guard(Option<oneshot::Sender<()>>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

fn respond(reply: &Reply) -> Response {
    let sse = [("content-type", "text/event-stream")];
    match reply {
        Reply::Sse(body) => (sse, body.clone()).into_response(),
        Reply::Error {
            status,
            headers,
            body,
        } => {
            let mut response = (
                StatusCode::from_u16(*status).expect("status"),
                [("content-type", "application/json")],
                body.clone(),
            )
                .into_response();
            for (name, value) in headers {
                response
                    .headers_mut()
                    .insert(*name, value.parse().expect("header value"));
            }
            response
        }
        Reply::Hang { first, dropped } => {
            let guard = Guard(dropped.lock().expect("lock").take());
            let first = Bytes::from(first.clone());
            let body = futures::stream::once(async move { Ok::<_, Infallible>(first) })
                .chain(futures::stream::pending())
                .map(move |chunk| {
                    let _keep = &guard;
                    chunk
                });
            (sse, axum::body::Body::from_stream(body)).into_response()
        }
    }
}

fn client() -> std::sync::Arc<Lanes> {
    std::sync::Arc::new(Lanes::new(ClientSettings::system().expect("TLS"), 100).expect("client"))
}

const KEY: &str = "sk-test-SECRET";

fn provider(adapter: Adapter, base_url: String) -> Box<dyn Provider> {
    with_debug(adapter, base_url).0
}

/// The provider and its `Debug` text.
fn with_debug(adapter: Adapter, base_url: String) -> (Box<dyn Provider>, String) {
    let key = Some(KEY.to_owned());
    match adapter {
        Adapter::OpenAi => {
            let p = OpenAiProvider::new(format!("{base_url}/v1"), key, client());
            let debug = format!("{p:?}");
            (Box::new(p), debug)
        }
        Adapter::Anthropic => {
            let p = AnthropicProvider::new(base_url, key, client());
            let debug = format!("{p:?}");
            (Box::new(p), debug)
        }
        Adapter::Gemini => {
            let p = GeminiProvider::new(base_url, key, client());
            let debug = format!("{p:?}");
            (Box::new(p), debug)
        }
    }
}

/// A conversation with everything a request builder has to place: a system text, an
/// assistant turn with two parallel calls, their two results, and a tool on offer.
fn conversation(model: &str, max_tokens: Option<u32>) -> ChatRequest {
    ChatRequest {
        model: model.to_owned(),
        system: Some("Be brief.".to_owned()),
        messages: vec![
            ChatMessage::User {
                content: "Weather in Paris, time in Tokyo?".to_owned(),
            },
            ChatMessage::Assistant {
                content: "Checking.".to_owned(),
                tool_calls: vec![
                    call("call_a", "get_weather", r#"{"city":"Paris"}"#),
                    call("call_b", "get_time", "{}"),
                ],
            },
            ChatMessage::Tool {
                tool_call_id: "call_a".to_owned(),
                content: "sunny".to_owned(),
            },
            ChatMessage::Tool {
                tool_call_id: "call_b".to_owned(),
                content: "09:00".to_owned(),
            },
        ],
        tools: vec![ToolSpec {
            name: "get_weather".to_owned(),
            description: "Weather for a city".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": false
            }),
        }],
        max_tokens,
        temperature: Some(0.5),
        stop: vec!["END".to_owned()],
        tool_choice: Some(ToolChoice::Required),
        ..ChatRequest::default()
    }
}

fn weather_schema() -> Value {
    conversation("m", None).tools[0].parameters.clone()
}

#[tokio::test]
async fn openai_over_http() {
    let file = "openai-chat/pydantic-ai__prefect_complex_agent_parallel_tools.1.sse";
    let upstream = Upstream::start(Reply::Sse(fixture(file))).await;
    let provider = provider(Adapter::OpenAi, upstream.url());
    assert_eq!(provider.kind(), "openai");
    let stream = provider
        .stream(conversation("gpt-4o", Some(300)))
        .await
        .expect("a stream");
    assert_eq!(outcome_of(stream).await, case(file).expected());

    let seen = upstream.seen();
    assert_eq!(seen.len(), 1);
    let Seen {
        path,
        headers,
        body,
        ..
    } = &seen[0];
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(headers["authorization"], format!("Bearer {KEY}").as_str());
    assert_eq!(body["model"], "gpt-4o");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], 300);
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["stop"], json!(["END"]));
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_weather", "description": "Weather for a city", "parameters": weather_schema()
        }}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris, time in Tokyo?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_b", "content": "09:00"}
        ])
    );
}

#[tokio::test]
async fn anthropic_over_http() {
    let file = "anthropic/anthropic-sdk-python__tool_use_response.txt";
    let upstream = Upstream::start(Reply::Sse(fixture(file))).await;
    let provider = provider(Adapter::Anthropic, upstream.url());
    assert_eq!(provider.kind(), "anthropic");
    let stream = provider
        .stream(conversation("claude-x", None))
        .await
        .expect("a stream");
    assert_eq!(outcome_of(stream).await, case(file).expected());

    let seen = upstream.seen();
    let Seen {
        path,
        headers,
        body,
        ..
    } = &seen[0];
    assert_eq!(path, "/v1/messages");
    assert_eq!(headers["x-api-key"], KEY);
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert!(headers.get("authorization").is_none());
    assert_eq!(body["model"], "claude-x");
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["max_tokens"], 4096,
        "max_tokens is required: the default fills in"
    );
    // System as blocks, and Relay's breakpoints: the end of the tools, of the system prompt,
    // and the newest message.
    let mark = json!({"type": "ephemeral"});
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "Be brief.", "cache_control": mark}])
    );
    assert_eq!(body["stop_sequences"], json!(["END"]));
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert_eq!(
        body["tools"],
        json!([{"name": "get_weather", "description": "Weather for a city", "input_schema": weather_schema(), "cache_control": mark}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris, time in Tokyo?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "call_a", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_b", "name": "get_time", "input": {}}
            ]},
            // Both results in one user turn.
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "09:00", "cache_control": mark}
            ]}
        ])
    );
}

#[tokio::test]
async fn gemini_over_http() {
    let file = "gemini/pydantic-ai__google_iter_stream.2.sse";
    let upstream = Upstream::start(Reply::Sse(fixture(file))).await;
    let provider = provider(Adapter::Gemini, upstream.url());
    assert_eq!(provider.kind(), "gemini");
    let stream = provider
        .stream(conversation("gemini-2.0-flash", Some(300)))
        .await
        .expect("a stream");
    assert_eq!(outcome_of(stream).await, case(file).expected());
    // Gemini 3 wants a thought signature on a replayed call; Relay keeps none and sends the
    // documented stand-in, on the first call of the turn only.
    let stream = provider
        .stream(conversation("gemini-3-pro-preview", None))
        .await
        .expect("a stream");
    assert_eq!(outcome_of(stream).await, case(file).expected());

    let seen = upstream.seen();
    let Seen {
        path,
        query,
        headers,
        body,
    } = &seen[0];
    assert_eq!(
        path,
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
    );
    assert_eq!(
        query.as_deref(),
        Some("alt=sse"),
        "the key never goes in the query"
    );
    assert_eq!(headers["x-goog-api-key"], KEY);
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}]})
    );
    assert_eq!(
        body["generationConfig"],
        json!({"maxOutputTokens": 300, "temperature": 0.5, "stopSequences": ["END"]})
    );
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    assert_eq!(
        body["tools"],
        json!([{"functionDeclarations": [{
            "name": "get_weather", "description": "Weather for a city", "parametersJsonSchema": weather_schema()
        }]}])
    );
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Weather in Paris, time in Tokyo?"}]},
            {"role": "model", "parts": [
                {"text": "Checking."},
                {"functionCall": {"id": "call_a", "name": "get_weather", "args": {"city": "Paris"}}},
                {"functionCall": {"id": "call_b", "name": "get_time", "args": {}}}
            ]},
            // Each response names its function, found from the call with that id.
            {"role": "user", "parts": [
                {"functionResponse": {"id": "call_a", "name": "get_weather", "response": {"result": "sunny"}}},
                {"functionResponse": {"id": "call_b", "name": "get_time", "response": {"result": "09:00"}}}
            ]}
        ])
    );
    let gemini3 = &seen[1].body["contents"][1]["parts"];
    assert_eq!(
        seen[1].path,
        "/v1beta/models/gemini-3-pro-preview:streamGenerateContent"
    );
    assert_eq!(
        gemini3[1]["thoughtSignature"],
        "skip_thought_signature_validator"
    );
    assert!(gemini3[2].get("thoughtSignature").is_none());
    assert_eq!(
        seen[1].body.get("generationConfig"),
        Some(&json!({"temperature": 0.5, "stopSequences": ["END"]}))
    );
}

#[tokio::test]
async fn llamacpp_http_400_names_the_error_type() {
    for (file, code) in HTTP_ERROR_FIXTURES {
        let upstream = Upstream::start(Reply::Error {
            status: 400,
            headers: Vec::new(),
            body: fixture(file),
        })
        .await;
        let err = provider(Adapter::OpenAi, upstream.url())
            .stream(conversation("smollm2", None))
            .await
            .err()
            .expect("an error");
        let ProviderError::Status {
            status,
            message,
            detail,
        } = &err
        else {
            panic!("{file}: {err:?}");
        };
        assert_eq!((*status, message.as_str()), (400, *code), "{file}");
        // The server's own words reach the user (issue 42).
        assert!(
            detail.as_deref().is_some_and(|d| !d.is_empty())
                && err.to_string().contains(detail.as_deref().unwrap_or("-")),
            "{file}: {err}"
        );
        assert!(!err.retryable_before_output());
    }
}

#[tokio::test]
async fn http_429_is_rate_limited_with_retry_after() {
    for adapter in [Adapter::OpenAi, Adapter::Anthropic, Adapter::Gemini] {
        let upstream = Upstream::start(Reply::Error {
            status: 429,
            headers: vec![("retry-after", "7")],
            body: br#"{"error":{"type":"rate_limit_error"}}"#.to_vec(),
        })
        .await;
        let err = provider(adapter, upstream.url())
            .stream(conversation("m", None))
            .await
            .err()
            .expect("an error");
        assert_eq!(
            err,
            ProviderError::RateLimited {
                retry_after: Some(Duration::from_secs(7)),
                code: Some("rate_limit_error".into()),
                detail: None,
            }
        );
        assert!(err.retryable_before_output());
    }
}

#[tokio::test]
async fn http_500_never_repeats_the_body() {
    // OpenAI's real wording for a bad key repeats the key; this body puts it everywhere.
    let body = json!({"error": {
        "message": format!("Incorrect API key provided: {KEY}"),
        "type": KEY,
        "code": KEY
    }});
    for adapter in [Adapter::OpenAi, Adapter::Anthropic, Adapter::Gemini] {
        let upstream = Upstream::start(Reply::Error {
            status: 500,
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        })
        .await;
        let (provider, debug) = with_debug(adapter, upstream.url());
        assert!(
            debug.contains("<redacted>") && !debug.contains("SECRET"),
            "{debug}"
        );
        let err = provider
            .stream(conversation("m", None))
            .await
            .err()
            .expect("an error");
        assert!(
            matches!(err, ProviderError::Status { status: 500, .. }),
            "{err:?}"
        );
        assert!(!err.to_string().contains("SECRET"), "{err}");
        assert!(!format!("{err:?}").contains("SECRET"), "{err:?}");
        assert!(err.retryable_before_output());
    }
}

#[tokio::test]
async fn connection_refused_is_connect() {
    // A port that was just free: nothing listens there any more.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    drop(listener);
    for adapter in [Adapter::OpenAi, Adapter::Anthropic, Adapter::Gemini] {
        let err = provider(adapter, format!("http://{addr}"))
            .stream(conversation("m", None))
            .await
            .err()
            .expect("an error");
        assert!(matches!(err, ProviderError::Connect(_)), "{err:?}");
        assert!(
            !err.to_string().contains("127.0.0.1"),
            "the URL stays out: {err}"
        );
        assert!(err.retryable_before_output());
    }
}

#[tokio::test]
async fn dropping_the_stream_closes_the_upstream_connection() {
    // Each fixture cut after its first text event: the answer has begun, far from finished.
    for (adapter, file, events) in [
        (
            Adapter::OpenAi,
            "openai-chat/pydantic-ai__run_stream_sync_real_model.1.sse",
            2,
        ),
        (
            Adapter::Anthropic,
            "anthropic/simonw-llm-anthropic__tools_parallel.1.sse",
            4,
        ),
        (
            Adapter::Gemini,
            "gemini/pydantic-ai__google_text_stream.0.sse",
            1,
        ),
    ] {
        let body = fixture(file);
        let cut = end_of_events(&body, events);
        let (tx, rx) = oneshot::channel();
        let upstream = Upstream::start(Reply::Hang {
            first: body[..cut].to_vec(),
            dropped: Mutex::new(Some(tx)),
        })
        .await;
        let mut stream = provider(adapter, upstream.url())
            .stream(conversation("m", None))
            .await
            .expect("a stream");
        // The first event of the answer (an early count, as Anthropic's `message_start`
        // carries, comes before it).
        let mut first_event = None;
        for _ in 0..2 {
            first_event = tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .expect("the first event in time");
            if !matches!(first_event, Some(Ok(ProviderEvent::UsageSoFar(_)))) {
                break;
            }
        }
        assert!(
            matches!(first_event, Some(Ok(ProviderEvent::Text(_)))),
            "{first_event:?}"
        );
        drop(stream);
        tokio::time::timeout(Duration::from_secs(10), rx)
            .await
            .unwrap_or_else(|_| panic!("{file}: the upstream connection stayed open"))
            .expect("the guard signals");
    }
}

/// Where the first `n` events of an SSE body end (LF or CRLF framing).
fn end_of_events(body: &[u8], n: usize) -> usize {
    let mut seen = 0;
    for i in 0..body.len() {
        let blank = match &body[i..] {
            [b'\n', b'\n', ..] => 2,
            [b'\n', b'\r', b'\n', ..] => 3,
            _ => continue,
        };
        seen += 1;
        if seen == n {
            return i + blank;
        }
    }
    panic!("fewer than {n} events")
}
