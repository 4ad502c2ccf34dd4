//! OpenAI Chat Completions streaming, and through `base_url` every server that speaks it
//! (llama.cpp, Ollama, vLLM, LM Studio, OpenRouter, DeepSeek, Groq, xAI...).
//!
//! Compatible servers differ in the details, so the normaliser is lenient where they do:
//! tool-call fragments are matched by id and by index (an id may be resent on every fragment,
//! an index may not start at 0), reasoning arrives as `reasoning_content` or `reasoning`,
//! usage may ride on the finish chunk or on its own chunk, and an error may arrive as an
//! `event: error` or as an `error` member of an ordinary chunk.
//!
//! This file maps requests; `stream.rs` decodes the stream.

mod stream;

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};

use super::transport::endpoint::{self, Endpoint, KeyHeader};
use super::transport::lanes::Lanes;
use super::{
    ChatMessage, ChatRequest, EventStream, Provider, ProviderError, ProviderEvent, ToolChoice,
};
use super::{passthrough, whole};

pub use stream::Normaliser;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The Chat Completions adapter.
#[derive(Clone, Debug)]
pub struct OpenAiProvider {
    endpoint: Endpoint,
}

impl OpenAiProvider {
    /// `base_url` ends before `/chat/completions` (e.g. `https://api.openai.com/v1`,
    /// `http://127.0.0.1:8080/v1`); empty means OpenAI's. A local server needs no key.
    pub fn new(base_url: String, api_key: Option<String>, lanes: Arc<Lanes>) -> Self {
        Self {
            endpoint: Endpoint::new(
                base_url,
                DEFAULT_BASE_URL,
                api_key,
                KeyHeader::Bearer,
                lanes,
            ),
        }
    }

    fn body<'a>(&self, request: &'a ChatRequest) -> Body<'a> {
        // OpenAI's own reasoning models refuse `max_tokens`; compatible servers mostly know
        // only `max_tokens`. Each gets the field it understands.
        let (max_tokens, max_completion_tokens) =
            if self.endpoint.base_url().contains("api.openai.com") {
                (None, request.max_tokens)
            } else {
                (request.max_tokens, None)
            };
        Body {
            model: &request.model,
            messages: messages(request),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            tools: request
                .tools
                .iter()
                .map(|t| WireTool {
                    kind: "function",
                    function: WireFunctionSpec {
                        name: &t.name,
                        description: &t.description,
                        parameters: &t.parameters,
                    },
                })
                .collect(),
            max_tokens,
            max_completion_tokens,
            temperature: request.temperature,
            stop: &request.stop,
            tool_choice: tool_choice(request),
        }
    }
}

/// `auto`, `none`, `required` or `{type: "function", function: {name}}`.
fn tool_choice(request: &ChatRequest) -> Option<Value> {
    let choice = request
        .tool_choice
        .as_ref()
        .filter(|_| !request.tools.is_empty())?;
    Some(match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Function(name) => json!({"type": "function", "function": {"name": name}}),
    })
}

#[async_trait]
impl Provider for OpenAiProvider {
    fn kind(&self) -> &'static str {
        "openai"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        let url = self.endpoint.url("/chat/completions")?;
        // The translation is built only for a client of another family.
        let body = passthrough::chat_body(
            &request,
            || serde_json::to_value(self.body(&request)).unwrap_or_default(),
            self.endpoint.base_url(),
        );
        let body = body.json()?;
        if whole::whole_for(&request, self.kind()) {
            let (normaliser, replay) = (Normaliser::new(), whole::chat);
            return whole::fetch(&self.endpoint, url, body, &[], normaliser, replay).await;
        }
        let response = self.endpoint.post_sse(url, body, &[]).await?;
        let raw = passthrough::raw_for(&request, self.kind());
        let events = endpoint::stream_response_raw(response, Normaliser::new(), raw);
        if !raw || passthrough::usage_chunk_asked(&request) {
            return Ok(events);
        }
        // Relay asked for the usage chunk for its own ledger; a client that did not ask for
        // it is not sent it (it has no choices, which such a client may not expect).
        Ok(Box::pin(events.filter(|event| {
            let usage_chunk = matches!(event, Ok(ProviderEvent::Raw(bytes))
                if [&b"\"choices\":[]"[..], b"\"choices\": []"]
                    .iter()
                    .any(|needle| bytes.windows(needle.len()).any(|w| w == *needle)));
            std::future::ready(!usage_chunk)
        })))
    }
}

fn messages(request: &ChatRequest) -> Vec<WireMessage<'_>> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    // The notes follow the client's system prompt, as a message of their own.
    let texts = [&request.system, &request.notes].into_iter().flatten();
    for content in texts.filter(|s| !s.is_empty()) {
        out.push(WireMessage::System { content });
    }
    for message in &request.messages {
        out.push(match message {
            ChatMessage::User { content } => WireMessage::User { content },
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => WireMessage::Assistant {
                // `null` content is how OpenAI spells "only tool calls".
                content: (!content.is_empty() || tool_calls.is_empty()).then_some(content.as_str()),
                tool_calls: tool_calls
                    .iter()
                    .map(|c| WireCall {
                        id: &c.id,
                        kind: "function",
                        function: WireCallFunction {
                            name: &c.name,
                            arguments: &c.arguments,
                        },
                    })
                    .collect(),
            },
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => WireMessage::Tool {
                tool_call_id,
                content,
            },
        });
    }
    out
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionSpec<'a>,
}

#[derive(Serialize)]
struct WireFunctionSpec<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}
