//! Conversion cases as snapshots, one file per format pair (the client's door → a provider of
//! another family), as agentgateway keeps its `llm/tests`: the body such a provider is sent for
//! a rich client request (system text, a tool call and its result, tools, tool choice, sampling),
//! and what the client gets back when the provider answers with a recorded stream. Any change to
//! a translation shows as a snapshot diff (`INSTA_UPDATE=always` writes the new one to review).
//!
//! Values that change from run to run (the keyed identity Relay puts in the fields it owns, ids
//! and times Relay mints for an answer) are replaced with `[volatile]` before the comparison.

mod chat_to_messages;
mod chat_to_responses;
mod messages_to_chat;
mod messages_to_responses;
mod responses_to_chat;
mod responses_to_messages;

use std::sync::{Arc, Mutex};

use axum::routing::post;
use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
use serde_json::{Value, json};

use crate::helpers::{TestApp, open_config};

/// A provider family: its kind, the route it is called on (below `/v1`), a recorded stream of it.
#[derive(Clone, Copy)]
pub enum Provider {
    Anthropic,
    Chat,
    Responses,
}

impl Provider {
    fn kind(self) -> ProviderKind {
        match self {
            Self::Anthropic => ProviderKind::Anthropic,
            Self::Chat => ProviderKind::Openai,
            Self::Responses => ProviderKind::OpenaiResponses,
        }
    }

    fn route(self) -> &'static str {
        match self {
            Self::Anthropic => "/v1/messages",
            Self::Chat => "/v1/chat/completions",
            Self::Responses => "/v1/responses",
        }
    }

    /// A recorded answer with text and a tool call.
    fn recording(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic/simonw-llm-anthropic__tools_parallel.0.sse",
            Self::Chat => "openai-chat/pydantic-ai__prefect_complex_agent_parallel_tools.0.sse",
            Self::Responses => "openai-responses/simonw-llm__responses_tool_use_streaming.0.sse",
        }
    }
}

/// What one conversion case gives: the provider's request body and the client's answer events.
pub struct Converted {
    pub upstream: Value,
    pub answer: Vec<Value>,
}

/// Sends `request` to `door` of a relay whose one model `m` is `provider`, which records the body
/// it is sent and answers with its recording.
pub async fn convert(door: &str, provider: Provider, request: Value) -> Converted {
    let request_text = request.to_string();
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = bodies.clone();
    let reply = crate::helpers::fixture(provider.recording());
    let app = axum::Router::new().route(
        provider.route(),
        post(move |body: axum::Json<Value>| {
            seen.lock().unwrap().push(body.0);
            let reply = reply.clone();
            async move {
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(reply))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let relay = TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.providers = vec![ProviderConfig {
            base_url: Some(match provider {
                Provider::Anthropic => format!("http://{addr}"),
                Provider::Chat | Provider::Responses => format!("http://{addr}/v1"),
            }),
            ..ProviderConfig::new("p", provider.kind())
        }];
        c.models = vec![ModelConfig {
            name: "m".into(),
            provider: "p".into(),
            upstream: "upstream-model".into(),
            ..Default::default()
        }];
        c
    })
    .await;
    let res = relay.post(door, None, &request).await;
    let status = res.status();
    let text = res.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    let mut upstream = bodies
        .lock()
        .unwrap()
        .first()
        .cloned()
        .expect("the provider was called");
    // What the client or the recording said is stable; only what Relay minted is not.
    let known = format!(
        "{request_text}{}",
        String::from_utf8_lossy(&crate::helpers::fixture(provider.recording()))
    );
    volatile(&mut upstream, &known);
    Converted {
        upstream,
        answer: events(&text, &known),
    }
}

/// The JSON of each SSE `data:` line (`[DONE]` as a string), with volatile values replaced.
fn events(text: &str, known: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .map(|d| {
            let mut v = serde_json::from_str(d).unwrap_or_else(|_| json!(d));
            volatile(&mut v, known);
            v
        })
        .collect()
}

/// The keyed identity Relay puts in the fields it owns differs per instance.
const IDENTITY: [&str; 4] = ["user", "user_id", "safety_identifier", "prompt_cache_key"];
/// Ids and times: volatile when Relay minted them (they appear in neither the request nor the
/// recording).
const MINTED: [&str; 5] = ["id", "item_id", "created", "created_at", "response_id"];

fn volatile(v: &mut Value, known: &str) {
    match v {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                let minted = MINTED.contains(&key.as_str())
                    && match value {
                        Value::String(s) => !known.contains(s.as_str()),
                        Value::Number(n) => !known.contains(&n.to_string()),
                        _ => false,
                    };
                if minted || (IDENTITY.contains(&key.as_str()) && value.is_string()) {
                    *value = json!("[volatile]");
                } else {
                    volatile(value, known);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| volatile(i, known)),
        _ => {}
    }
}

/// A Messages request with every part a translation must carry.
pub fn messages_request() -> Value {
    json!({
        "model": "m",
        "max_tokens": 512,
        "temperature": 0.3,
        "stop_sequences": ["END"],
        "stream": true,
        "system": [{"type": "text", "text": "You are terse."}],
        "tools": [{
            "name": "get_weather",
            "description": "The weather in a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        }],
        "tool_choice": {"type": "auto"},
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C, clear"},
                {"type": "text", "text": "And in Berlin?"}
            ]}
        ]
    })
}

/// The same conversation as a Chat Completions request.
pub fn chat_request() -> Value {
    json!({
        "model": "m",
        "max_tokens": 512,
        "temperature": 0.3,
        "stop": ["END"],
        "stream": true,
        "stream_options": {"include_usage": true},
        "tools": [{"type": "function", "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        }}],
        "tool_choice": "auto",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C, clear"},
            {"role": "user", "content": "And in Berlin?"}
        ]
    })
}

/// The same conversation as a Responses request.
pub fn responses_request() -> Value {
    json!({
        "model": "m",
        "max_output_tokens": 512,
        "temperature": 0.3,
        "stream": true,
        "store": false,
        "instructions": "You are terse.",
        "tools": [{
            "type": "function",
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        }],
        "tool_choice": "auto",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18 C, clear"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And in Berlin?"}]}
        ]
    })
}
