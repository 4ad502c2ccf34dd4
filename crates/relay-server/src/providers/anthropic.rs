//! Anthropic Messages streaming (`POST {base_url}/v1/messages`), also spoken by llama.cpp.
//!
//! The stream is a sequence of content blocks addressed by index: text, thinking, and
//! tool_use blocks whose input arrives as `input_json_delta` fragments. Blocks are tracked by
//! index rather than by "the current block", because llama.cpp opens the next block before
//! closing the previous one.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::sse::{EventNormaliser, parse_json};
use super::transport::endpoint::{self, Endpoint, KeyHeader};
use super::transport::lanes::Lanes;
use super::{
    ChatMessage, ChatRequest, DraftCall, EventStream, FinishReason, Provider, ProviderError,
    ProviderEvent, ToolChoice, Usage, error_from_json, finish_turn,
};
use super::{passthrough, whole};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";
/// The most bytes of a `count_tokens` answer read (`{"input_tokens": n}` is a few dozen).
const COUNT_ANSWER_MAX: usize = 1024 * 1024;
/// The Messages API requires `max_tokens`; this is used when the caller gives none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The Messages API adapter.
#[derive(Clone, Debug)]
pub struct AnthropicProvider {
    endpoint: Endpoint,
}

impl AnthropicProvider {
    /// `base_url` ends before `/v1/messages`; empty means Anthropic's.
    pub fn new(base_url: String, api_key: Option<String>, lanes: Arc<Lanes>) -> Self {
        Self {
            endpoint: Endpoint::new(
                base_url,
                DEFAULT_BASE_URL,
                api_key,
                KeyHeader::Named("x-api-key"),
                lanes,
            ),
        }
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    fn kind(&self) -> &'static str {
        "anthropic"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        let url = self.endpoint.url("/v1/messages")?;
        // The translation is built only for a client of another family.
        let body = passthrough::messages_body(&request, || {
            serde_json::to_value(body(&request)).unwrap_or_default()
        });
        let mut headers = vec![("anthropic-version", API_VERSION)];
        if let Some(beta) = request
            .passthrough
            .as_deref()
            .and_then(|p| p.anthropic_beta.as_deref())
        {
            headers.push(("anthropic-beta", beta));
        }
        let body = body.json()?;
        if whole::whole_for(&request, self.kind()) {
            let (normaliser, replay) = (Normaliser::new(), whole::messages);
            return whole::fetch(&self.endpoint, url, body, &headers, normaliser, replay).await;
        }
        let response = self.endpoint.post_sse(url, body, &headers).await?;
        let raw = passthrough::raw_for(&request, self.kind());
        Ok(endpoint::stream_response_raw(
            response,
            Normaliser::new(),
            raw,
        ))
    }

    async fn count_tokens(&self, body: Value) -> Option<Result<u64, ProviderError>> {
        Some(self.count(body).await)
    }
}

impl AnthropicProvider {
    /// `POST {base_url}/v1/messages/count_tokens`: `{input_tokens}`. An answer past
    /// `COUNT_ANSWER_MAX` is refused as it arrives (the connection is dropped); the caller bounds
    /// the time.
    async fn count(&self, body: Value) -> Result<u64, ProviderError> {
        use futures::TryStreamExt;
        let url = self.endpoint.url("/v1/messages/count_tokens")?;
        let upstream = self
            .endpoint
            .post_sse(
                url,
                endpoint::json(&body)?,
                &[("anthropic-version", API_VERSION)],
            )
            .await?;
        let bytes = upstream
            .body
            .try_fold(Vec::new(), |mut all, chunk| async move {
                if all.len().saturating_add(chunk.len()) > COUNT_ANSWER_MAX {
                    return Err(ProviderError::Protocol(
                        "count_tokens answered more than 1 MiB".into(),
                    ));
                }
                all.extend_from_slice(&chunk);
                Ok(all)
            })
            .await?;
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v["input_tokens"].as_u64())
            .ok_or_else(|| {
                ProviderError::Protocol("count_tokens answered without input_tokens".into())
            })
    }
}

fn body(request: &ChatRequest) -> Body<'_> {
    Body {
        model: &request.model,
        max_tokens: request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        stream: true,
        system: request.system.as_deref().filter(|s| !s.is_empty()),
        messages: messages(&request.messages),
        tools: request
            .tools
            .iter()
            .map(|t| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
            })
            .collect(),
        temperature: request.temperature,
        stop_sequences: &request.stop,
        tool_choice: tool_choice(request),
    }
}

/// `{type: "auto" | "none" | "any"}` or `{type: "tool", name}`.
fn tool_choice(request: &ChatRequest) -> Option<Value> {
    let choice = request
        .tool_choice
        .as_ref()
        .filter(|_| !request.tools.is_empty())?;
    Some(match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Function(name) => json!({"type": "tool", "name": name}),
    })
}

/// Relay's messages as Messages turns. Roles must alternate, so consecutive turns of one role
/// are merged: several tool results become one user turn of `tool_result` blocks (text after
/// them joins the same turn), and an empty assistant turn, which the API refuses, disappears.
fn messages(messages: &[ChatMessage]) -> Vec<WireMessage<'_>> {
    let mut out: Vec<WireMessage<'_>> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            ChatMessage::User { content } => ("user", vec![Block::Text { text: content }]),
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => (
                "user",
                vec![Block::ToolResult {
                    tool_use_id: tool_call_id,
                    content,
                }],
            ),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if !content.is_empty() {
                    blocks.push(Block::Text { text: content });
                }
                blocks.extend(tool_calls.iter().map(|c| Block::ToolUse {
                    id: &c.id,
                    name: &c.name,
                    input: tool_input(&c.arguments),
                }));
                if blocks.is_empty() {
                    continue;
                }
                ("assistant", blocks)
            }
        };
        match out.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => out.push(WireMessage {
                role,
                content: blocks,
            }),
        }
    }
    out
}

/// `tool_use.input` must be an object; arguments that are not one (a model's broken JSON,
/// echoed back) are sent as an empty object rather than failing the whole request.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::Object(serde_json::Map::new()),
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a str>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

// ---- the stream ----

#[derive(Deserialize)]
struct StreamEvent {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    message: Option<MessageStart>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    /// Server tools' runs (`{"web_search_requests": 2, "web_fetch_requests": 1}`).
    #[serde(default)]
    server_tool_use: Option<serde_json::Map<String, Value>>,
}

/// Messages stream events in, `ProviderEvent`s out.
#[derive(Debug, Default)]
pub struct Normaliser {
    calls: Vec<DraftCall>,
    /// A tool_use block's index → its draft. A block's `input` given whole at its start is
    /// kept aside and used only if no fragment follows.
    tool_blocks: HashMap<u64, (usize, Option<String>)>,
    input_tokens: u64,
    cache_read: Option<u64>,
    cache_creation: u64,
    output_tokens: u64,
    server_tool_uses: Option<u64>,
    stop_reason: Option<String>,
    stopped: bool,
}

impl Normaliser {
    pub fn new() -> Self {
        Self::default()
    }

    /// The counts so far. Anthropic counts cache reads and writes apart from `input_tokens`;
    /// Relay's input is the whole prompt, like OpenAI's `prompt_tokens`.
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self
                .input_tokens
                .saturating_add(self.cache_read.unwrap_or(0))
                .saturating_add(self.cache_creation),
            output_tokens: self.output_tokens,
            cached_input_tokens: self.cache_read,
            cache_write_tokens: (self.cache_creation > 0).then_some(self.cache_creation),
            reasoning_tokens: None,
            server_tool_uses: self.server_tool_uses,
        }
    }

    /// Counts are cumulative: a later report replaces an earlier one, field by field.
    fn take_usage(&mut self, usage: WireUsage) {
        if let Some(n) = usage.input_tokens {
            self.input_tokens = n;
        }
        if let Some(n) = usage.output_tokens {
            self.output_tokens = n;
        }
        if let Some(n) = usage.cache_read_input_tokens {
            self.cache_read = Some(n);
        }
        if let Some(n) = usage.cache_creation_input_tokens {
            self.cache_creation = n;
        }
        if let Some(runs) = usage.server_tool_use {
            self.server_tool_uses = Some(runs.values().filter_map(Value::as_u64).sum());
        }
    }

    fn block_start(&mut self, index: u64, block: &Value) -> Option<ProviderEvent> {
        let text = |field: &str| {
            block
                .get(field)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text("text").map(ProviderEvent::Text),
            Some("thinking") => text("thinking").map(ProviderEvent::Reasoning),
            Some("redacted_thinking") => text("data").map(ProviderEvent::RedactedReasoning),
            Some("tool_use") => {
                let initial = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .map(Value::to_string);
                self.calls.push(DraftCall {
                    id: text("id").unwrap_or_else(|| format!("toolu_{index}")),
                    name: text("name").unwrap_or_default(),
                    arguments: String::new(),
                });
                self.tool_blocks
                    .insert(index, (self.calls.len() - 1, initial));
                None
            }
            _ => None,
        }
    }

    fn block_delta(&mut self, index: u64, delta: &Value) -> Option<ProviderEvent> {
        let text = |field: &str| {
            delta
                .get(field)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => text("text").map(ProviderEvent::Text),
            Some("thinking_delta") => text("thinking").map(ProviderEvent::Reasoning),
            Some("input_json_delta") => {
                if let (Some((slot, _)), Some(fragment)) =
                    (self.tool_blocks.get(&index), text("partial_json"))
                {
                    self.calls[*slot].arguments.push_str(&fragment);
                }
                None
            }
            // The signature closes the thinking block; a client sends it back next turn.
            Some("signature_delta") => text("signature").map(ProviderEvent::ReasoningSignature),
            // citations_delta: nothing Relay shows.
            _ => None,
        }
    }
}

impl EventNormaliser for Normaliser {
    fn feed(&mut self, event: &str, data: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
        let value: Value = parse_json(data)?;
        // The data's own `type` is authoritative; the SSE name is the fallback.
        if value.get("type").and_then(Value::as_str).unwrap_or(event) == "error" {
            return Err(error_from_json(None, &value));
        }
        let parsed: StreamEvent = serde_json::from_value(value)
            .map_err(|e| ProviderError::Protocol(format!("an unexpected event shape ({e})")))?;
        let kind = parsed.kind.as_deref().unwrap_or(event);
        let index = parsed.index.unwrap_or(0);
        let out = match kind {
            "message_start" => parsed.message.and_then(|m| m.usage).map(|usage| {
                self.take_usage(usage);
                ProviderEvent::UsageSoFar(self.usage())
            }),
            "content_block_start" => parsed
                .content_block
                .as_ref()
                .and_then(|b| self.block_start(index, b)),
            "content_block_delta" => parsed
                .delta
                .as_ref()
                .and_then(|d| self.block_delta(index, d)),
            "message_delta" => {
                if let Some(reason) = parsed
                    .delta
                    .as_ref()
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = parsed.usage {
                    self.take_usage(usage);
                }
                None
            }
            "message_stop" => {
                self.stopped = true;
                None
            }
            // ping, content_block_stop, and whatever Anthropic adds later.
            _ => None,
        };
        Ok(out.into_iter().collect())
    }

    fn finish(&mut self) -> Result<ProviderEvent, ProviderError> {
        if self.stop_reason.is_none() && !self.stopped {
            return Err(ProviderError::Protocol(
                "the stream ended before the message finished".into(),
            ));
        }
        let reason = match self.stop_reason.as_deref() {
            Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
            Some("tool_use") => FinishReason::ToolCalls,
            Some("refusal") => FinishReason::ContentFilter,
            // end_turn, stop_sequence, pause_turn.
            _ => FinishReason::Stop,
        };
        for (slot, initial) in self.tool_blocks.values_mut() {
            let call = &mut self.calls[*slot];
            if call.arguments.trim().is_empty()
                && let Some(initial) = initial.take()
            {
                call.arguments = initial;
            }
        }
        let usage = self.usage();
        Ok(finish_turn(reason, std::mem::take(&mut self.calls), usage))
    }

    fn is_complete(&self) -> bool {
        self.stopped
    }
}
