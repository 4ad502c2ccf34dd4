//! OpenAI Chat Completions streaming, and through `base_url` every server that speaks it
//! (llama.cpp, Ollama, vLLM, LM Studio, OpenRouter, DeepSeek, Groq, xAI...).
//!
//! Compatible servers differ in the details, so the normaliser is lenient where they do:
//! tool-call fragments are matched by id and by index (an id may be resent on every fragment,
//! an index may not start at 0), reasoning arrives as `reasoning_content` or `reasoning`,
//! usage may ride on the finish chunk or on its own chunk, and an error may arrive as an
//! `event: error` or as an `error` member of an ordinary chunk.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::passthrough;
use super::sse::{EventNormaliser, parse_json};
use super::transport::endpoint::{self, Endpoint, KeyHeader};
use super::transport::lanes::Lanes;
use super::{
    ChatMessage, ChatRequest, DraftCall, EventStream, FinishReason, Provider, ProviderError,
    ProviderEvent, ToolChoice, Usage, error_from_json, finish_turn,
};

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
        let translated = serde_json::to_value(self.body(&request)).unwrap_or_default();
        let body = passthrough::chat_body(&request, translated, self.endpoint.base_url());
        let response = self.endpoint.post_sse(url, &body, &[]).await?;
        Ok(endpoint::stream_response(response, Normaliser::new()))
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

// ---- the stream ----

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    /// A string, or (some servers) an array of `{type, text}` parts.
    #[serde(default)]
    content: Option<Value>,
    /// DeepSeek, llama.cpp, xAI.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// OpenRouter, Groq, Ollama.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
    /// The legacy single-function form.
    #[serde(default)]
    function_call: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A string fragment; a few servers send a whole object instead.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
    /// DeepSeek's name for cached prompt tokens.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Deserialize)]
struct CompletionTokensDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// Chat Completions chunks in, `ProviderEvent`s out.
#[derive(Debug, Default)]
pub struct Normaliser {
    calls: Vec<DraftCall>,
    /// Which draft a fragment's `index` refers to: the most recent call seen at that index.
    by_index: HashMap<u64, usize>,
    finish_reason: Option<String>,
    usage: Usage,
    done: bool,
}

impl Normaliser {
    pub fn new() -> Self {
        Self::default()
    }

    fn tool_fragment(
        &mut self,
        index: Option<u64>,
        id: Option<&str>,
        function: Option<&FunctionDelta>,
    ) {
        let id = id.filter(|s| !s.is_empty());
        let name = function
            .and_then(|f| f.name.as_deref())
            .filter(|s| !s.is_empty());
        let arguments = function
            .and_then(|f| f.arguments.as_ref())
            .map(argument_text);
        let arguments = arguments.as_deref().unwrap_or("");

        // An id names its call wherever it appears; without one, the index does.
        let existing = match id {
            Some(id) => self.calls.iter().position(|c| c.id == id),
            None => match index {
                Some(i) => self.by_index.get(&i).copied(),
                None => self.calls.len().checked_sub(1),
            },
        };
        let slot = match existing {
            Some(slot) => slot,
            None => {
                let id = id.map_or_else(|| format!("call_{}", self.calls.len()), str::to_owned);
                self.calls.push(DraftCall {
                    id,
                    ..DraftCall::default()
                });
                self.calls.len() - 1
            }
        };
        if let Some(i) = index {
            self.by_index.insert(i, slot);
        }
        let call = &mut self.calls[slot];
        if call.name.is_empty()
            && let Some(name) = name
        {
            call.name = name.to_owned();
        }
        // A fragment that carries the id again after the arguments already form a whole JSON
        // document is the call being resent, not more of it: keep one copy.
        let resent = existing.is_some() && id.is_some() && is_complete_json(&call.arguments);
        if resent {
            if !arguments.is_empty() && is_complete_json(arguments) {
                call.arguments = arguments.to_owned();
            }
        } else {
            call.arguments.push_str(arguments);
        }
    }
}

fn argument_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn is_complete_json(text: &str) -> bool {
    !text.trim().is_empty() && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

impl EventNormaliser for Normaliser {
    fn feed(&mut self, event: &str, data: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        if event == "error" {
            return Err(error_from_json(None, &parse_json::<Value>(data)?));
        }
        let chunk: Chunk = parse_json(data)?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(error_from_json(None, &error));
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(usage.prompt_cache_hit_tokens);
            let reasoning = usage
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens);
            let input = usage.prompt_tokens.unwrap_or(0);
            let completion = usage.completion_tokens.unwrap_or(0);
            // xAI leaves reasoning out of `completion_tokens` but not out of `total_tokens`;
            // for everyone else the two ways of counting agree.
            let output = usage.total_tokens.map_or(completion, |total| {
                completion.max(total.saturating_sub(input))
            });
            self.usage = Usage {
                input_tokens: input,
                output_tokens: output,
                cached_input_tokens: cached,
                cache_write_tokens: None,
                reasoning_tokens: reasoning,
            };
        }
        let mut out = Vec::new();
        // Relay asks for one choice; another index would be a second, unrelated answer.
        for choice in chunk
            .choices
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.index.unwrap_or(0) == 0)
        {
            let delta = choice.delta.unwrap_or_default();
            for reasoning in [delta.reasoning_content, delta.reasoning]
                .into_iter()
                .flatten()
            {
                if !reasoning.is_empty() {
                    out.push(ProviderEvent::Reasoning(reasoning));
                }
            }
            match delta.content {
                Some(Value::String(text)) if !text.is_empty() => {
                    out.push(ProviderEvent::Text(text))
                }
                Some(Value::Array(parts)) => out.extend(content_parts(&parts)),
                _ => {}
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.tool_fragment(call.index, call.id.as_deref(), call.function.as_ref());
            }
            if let Some(function) = delta.function_call {
                self.tool_fragment(Some(0), None, Some(&function));
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<ProviderEvent, ProviderError> {
        // `[DONE]` alone is an end too: some OpenRouter routes never send a finish_reason.
        if self.finish_reason.is_none() && !self.done {
            return Err(ProviderError::Protocol(
                "the stream ended before the answer finished".into(),
            ));
        }
        let reason = match self.finish_reason.as_deref() {
            Some("length") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        };
        Ok(finish_turn(
            reason,
            std::mem::take(&mut self.calls),
            self.usage,
        ))
    }

    fn is_complete(&self) -> bool {
        self.done
    }
}

/// Content given as parts (Mistral and a few others): text parts are answer, thinking parts
/// are reasoning.
fn content_parts(parts: &[Value]) -> Vec<ProviderEvent> {
    parts
        .iter()
        .filter_map(|part| {
            let text = part
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())?;
            match part.get("type").and_then(Value::as_str) {
                Some("thinking" | "reasoning") => Some(ProviderEvent::Reasoning(text.to_owned())),
                _ => Some(ProviderEvent::Text(text.to_owned())),
            }
        })
        .collect()
}
