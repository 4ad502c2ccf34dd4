//! OpenAI's Responses API (`POST /responses`, `kind = "openai_responses"`), which OpenAI's newest
//! models are served through and which llama.cpp and LM Studio also speak.
//!
//! The request carries the system text as `instructions` and the conversation as input items
//! (messages, `function_call` and `function_call_output` for the tool round trip). The stream is
//! typed events: text and reasoning deltas (reasoning items also open and close as
//! `ReasoningItem`s, so their id and `encrypted_content` reach the Responses door), function-call items whose arguments arrive as deltas
//! and then whole (`.done`, `output_item.done`: the whole form wins), and one terminal
//! `response.completed` / `response.incomplete` / `response.failed`, or an `error` event.

use async_trait::async_trait;
use relay_wire::agent::ReasoningItem;
use serde_json::{Value, json};
use std::sync::Arc;

use super::sse::{EventNormaliser, parse_json};
use super::transport::endpoint::{self, Endpoint, KeyHeader};
use super::transport::lanes::Lanes;
use super::{
    ChatMessage, ChatRequest, DraftCall, EventStream, FinishReason, Provider, ProviderError,
    ProviderEvent, ToolChoice, Usage, error_from_json, finish_turn,
};
use super::{passthrough, whole};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Joins a call's `namespace` and its name into the one function name the leg carries (the
/// Responses door offers a namespace's tools under the same names and maps them back).
pub const NAMESPACE_SEPARATOR: &str = "__";

/// A call's name as the leg carries it: `{namespace}__{name}` when the item names a namespace.
pub fn flat_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}{NAMESPACE_SEPARATOR}{name}"),
        _ => name.to_owned(),
    }
}

/// The Responses adapter.
#[derive(Clone, Debug)]
pub struct OpenAiResponsesProvider {
    endpoint: Endpoint,
}

impl OpenAiResponsesProvider {
    /// `base_url` ends before `/responses` (e.g. `https://api.openai.com/v1`,
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
}

#[async_trait]
impl Provider for OpenAiResponsesProvider {
    fn kind(&self) -> &'static str {
        "openai_responses"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        let url = self.endpoint.url("/responses")?;
        // The translation is built only for a client of another family.
        let body =
            passthrough::responses_body(&request, || body(&request), self.endpoint.base_url());
        let body = body.json()?;
        if whole::whole_for(&request, self.kind()) {
            let (normaliser, replay) = (Normaliser::default(), whole::responses);
            return whole::fetch(&self.endpoint, url, body, &[], normaliser, replay).await;
        }
        let response = self.endpoint.post_sse(url, body, &[]).await?;
        let raw = passthrough::raw_for(&request, self.kind());
        Ok(endpoint::stream_response_raw(
            response,
            Normaliser::default(),
            raw,
        ))
    }
}

/// The request body. `store: false`: Relay sends the whole conversation every time.
pub fn body(request: &ChatRequest) -> Value {
    let mut input = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        match message {
            ChatMessage::User { content } => {
                input.push(json!({"type": "message", "role": "user", "content": content}));
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                if !content.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant", "content": content}));
                }
                for c in tool_calls {
                    input.push(json!({"type": "function_call", "call_id": c.id,
                        "name": c.name, "arguments": c.arguments}));
                }
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => input.push(json!({"type": "function_call_output",
                "call_id": tool_call_id, "output": content})),
        }
    }
    let mut body = json!({
        "model": request.model,
        "input": input,
        "stream": true,
        "store": false,
    });
    if let Some(system) = request.system_text().filter(|s| !s.is_empty()) {
        body["instructions"] = json!(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name,
                "description": t.description, "parameters": t.parameters})
            })
            .collect();
    }
    if let Some(max) = request.max_tokens {
        body["max_output_tokens"] = json!(max);
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    // The Responses API has no stop sequences: `request.stop` is dropped here.
    if let Some(choice) = request
        .tool_choice
        .as_ref()
        .filter(|_| !request.tools.is_empty())
    {
        body["tool_choice"] = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Function(name) => json!({"type": "function", "name": name}),
        };
    }
    body
}

/// The texts of an item's parts (`summary` or `content`), in order.
fn texts(parts: &Value) -> Vec<String> {
    parts
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A reasoning item as it opens (its id) or closes (with the final `encrypted_content`, which
/// may differ from the one announced when it opened, and its parts); none without an id.
fn reasoning_item(item: &Value, done: bool) -> Option<ReasoningItem> {
    let id = item["id"].as_str().filter(|id| !id.is_empty())?.to_owned();
    if !done {
        return Some(ReasoningItem {
            id,
            encrypted_content: None,
            summary: None,
            content: None,
        });
    }
    let content = texts(&item["content"]);
    Some(ReasoningItem {
        id,
        encrypted_content: item["encrypted_content"].as_str().map(str::to_owned),
        summary: Some(texts(&item["summary"])),
        content: (!content.is_empty()).then_some(content),
    })
}

/// A function call being assembled, with the item id its deltas name. A `custom_tool_call`
/// (freeform input) is assembled in `call.arguments` as its raw input and carried as the leg
/// carries a custom tool's call everywhere: arguments `{"input": <text>}`.
#[derive(Debug, Default)]
struct Draft {
    item_id: String,
    output_index: Option<u64>,
    custom: bool,
    call: DraftCall,
}

/// Responses events in, normalised events out.
#[derive(Debug, Default)]
pub struct Normaliser {
    drafts: Vec<Draft>,
    usage: Usage,
    reason: Option<FinishReason>,
}

impl Normaliser {
    /// The draft a delta or item belongs to: by item id, else by output index.
    fn draft(&mut self, item_id: Option<&str>, output_index: Option<u64>) -> Option<&mut Draft> {
        let at = self.drafts.iter().position(|d| {
            item_id.is_some_and(|id| !id.is_empty() && d.item_id == id)
                || (item_id.is_none() && output_index.is_some() && d.output_index == output_index)
        })?;
        self.drafts.get_mut(at)
    }

    /// A `function_call` or `custom_tool_call` item (added or done): opens its draft, or
    /// completes it with the whole form.
    fn function_item(&mut self, item: &Value, output_index: Option<u64>, done: bool) {
        let item_id = item["id"].as_str().unwrap_or_default().to_owned();
        let custom = item["type"] == "custom_tool_call";
        let known = self.draft(Some(&item_id), output_index).is_some();
        if !known {
            self.drafts.push(Draft {
                item_id: item_id.clone(),
                output_index,
                custom,
                call: DraftCall::default(),
            });
        }
        let Some(draft) = self.draft(Some(&item_id), output_index) else {
            return;
        };
        if let Some(id) = item["call_id"].as_str().filter(|s| !s.is_empty()) {
            id.clone_into(&mut draft.call.id);
        }
        if let Some(name) = item["name"].as_str().filter(|s| !s.is_empty()) {
            draft.call.name = flat_name(item["namespace"].as_str(), name);
        }
        let payload = if custom { "input" } else { "arguments" };
        if let Some(arguments) = item[payload].as_str()
            && (done || draft.call.arguments.is_empty())
            && !(done && arguments.is_empty())
        {
            arguments.clone_into(&mut draft.call.arguments);
        }
    }

    fn usage_of(response: &Value) -> Usage {
        let usage = &response["usage"];
        Usage {
            input_tokens: usage["input_tokens"].as_u64().unwrap_or(0),
            output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
            cached_input_tokens: usage["input_tokens_details"]["cached_tokens"].as_u64(),
            cache_write_tokens: None,
            reasoning_tokens: usage["output_tokens_details"]["reasoning_tokens"].as_u64(),
            server_tool_uses: hosted_runs(response),
        }
    }
}

impl EventNormaliser for Normaliser {
    fn feed(&mut self, event: &str, data: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
        if data.trim().is_empty() || data.trim() == "[DONE]" {
            return Ok(Vec::new());
        }
        let value: Value = parse_json(data)?;
        // The payload's `type` names the event; the SSE event name is only a fallback.
        let kind = value["type"].as_str().unwrap_or(event);
        let item_id = value["item_id"].as_str();
        let output_index = value["output_index"].as_u64();
        let mut out = Vec::new();
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(text) = value["delta"].as_str().filter(|t| !t.is_empty()) {
                    out.push(ProviderEvent::Text(text.to_owned()));
                }
            }
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                if let Some(text) = value["delta"].as_str().filter(|t| !t.is_empty()) {
                    out.push(ProviderEvent::Reasoning(text.to_owned()));
                }
            }
            "response.output_item.added" | "response.output_item.done"
                if matches!(
                    value["item"]["type"].as_str(),
                    Some("function_call" | "custom_tool_call")
                ) =>
            {
                let done = kind == "response.output_item.done";
                self.function_item(&value["item"], output_index, done);
            }
            "response.output_item.added" | "response.output_item.done"
                if value["item"]["type"] == "reasoning" =>
            {
                let done = kind == "response.output_item.done";
                out.extend(reasoning_item(&value["item"], done).map(ProviderEvent::ReasoningItem));
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                if let (Some(draft), Some(delta)) =
                    (self.draft(item_id, output_index), value["delta"].as_str())
                {
                    draft.call.arguments.push_str(delta);
                }
            }
            "response.function_call_arguments.done" | "response.custom_tool_call_input.done" => {
                let field = if kind.starts_with("response.custom") {
                    "input"
                } else {
                    "arguments"
                };
                if let (Some(draft), Some(arguments)) = (
                    self.draft(item_id, output_index),
                    value[field].as_str().filter(|a| !a.is_empty()),
                ) {
                    arguments.clone_into(&mut draft.call.arguments);
                }
            }
            "response.completed" => {
                self.usage = Self::usage_of(&value["response"]);
                self.reason = Some(FinishReason::Stop);
            }
            "response.incomplete" => {
                self.usage = Self::usage_of(&value["response"]);
                self.reason = Some(
                    match value["response"]["incomplete_details"]["reason"].as_str() {
                        Some("content_filter") => FinishReason::ContentFilter,
                        _ => FinishReason::Length,
                    },
                );
            }
            "response.failed" => {
                let error = &value["response"]["error"];
                return Err(error_from_json(
                    None,
                    if error.is_object() { error } else { &value },
                ));
            }
            "error" => return Err(error_from_json(None, &value)),
            _ => {}
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<ProviderEvent, ProviderError> {
        let Some(reason) = self.reason else {
            return Err(ProviderError::Protocol(
                "the stream ended before the response completed".into(),
            ));
        };
        let drafts = std::mem::take(&mut self.drafts)
            .into_iter()
            .map(|mut d| {
                if d.custom {
                    d.call.arguments = json!({"input": d.call.arguments}).to_string();
                }
                d.call
            })
            .collect();
        Ok(finish_turn(reason, drafts, self.usage))
    }

    fn is_complete(&self) -> bool {
        self.reason.is_some()
    }
}
/// The tools the provider ran itself in a finished response (`web_search_call`,
/// `code_interpreter_call`, ...: every `*_call` item that is not the client's own function or
/// custom tool call); `None` when it ran none.
fn hosted_runs(response: &Value) -> Option<u64> {
    let runs = response["output"]
        .as_array()?
        .iter()
        .filter(|item| {
            item["type"].as_str().is_some_and(|t| {
                t.ends_with("_call") && !matches!(t, "function_call" | "custom_tool_call")
            })
        })
        .count() as u64;
    (runs > 0).then_some(runs)
}
