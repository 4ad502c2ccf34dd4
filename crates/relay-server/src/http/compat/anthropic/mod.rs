//! `POST /v1/messages`: Anthropic's Messages API, streamed (`message_start`, content blocks,
//! `message_delta`, `message_stop`, `ping`) and not, answered by whichever model the leg
//! machinery routes to.
//!
//! This file reads the request; `stream.rs` encodes the answer.

mod stream;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use relay_wire::agent::{
    AgentRequest, Content, Message, MessageRole, MessageToolCall, ToolCall, Usage,
};
use relay_wire::tools::ToolDef;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::door::{self, Door, Translated};
use crate::error::ApiError;
use crate::http::state::AppState;
use crate::legs::DoorLeg;
use crate::providers::ToolChoice;
pub use stream::Writer;

/// A Messages request. Fields Relay does not own (`thinking`, `metadata`, `top_k`, `cache_control`,
/// signed thinking blocks...) reach an `anthropic` provider unchanged.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MessagesRequest {
    /// `auto` or a configured model name (see `GET /v1/models`).
    pub model: String,
    /// Required, as Anthropic requires it.
    #[schema(minimum = 1)]
    pub max_tokens: u32,
    #[schema(min_items = 1)]
    pub messages: Vec<MessageIn>,
    /// A string or an array of `{type: "text", text}` blocks.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub system: Option<Value>,
    #[serde(default)]
    pub tools: Vec<ToolIn>,
    /// `{type: "auto" | "any" | "none"}` or `{type: "tool", name}`, forwarded in the answering
    /// provider's own form.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Forwarded to the provider (the Responses API has none).
    #[serde(default)]
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    pub stream: bool,
}

/// A `user` or `assistant` message.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MessageIn {
    pub role: String,
    /// A string or blocks: `text`, `tool_use` (assistant), `tool_result` (user).
    // Required here; the translation reads it where it lies in the parsed body rather than from
    // a copy (the conversation is most of a long session's call).
    #[schema(value_type = Object)]
    pub content: serde::de::IgnoredAny,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ToolIn {
    pub name: String,
    /// Absent (or `custom`) for the client's own tools; a typed tool (`web_search_20250305`,
    /// `bash_20250124`, ...) exists only at Anthropic: it reaches an `anthropic` provider as sent
    /// (where the pass-through policy allows it) and is left out of a translation.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub input_schema: Value,
}

/// A non-streamed answer (`type: "message"`).
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageOut {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub role: &'static str,
    /// The configured model that answered (never `auto`).
    pub model: String,
    /// `text` and `tool_use` blocks.
    #[schema(value_type = Vec<Object>)]
    pub content: Vec<Value>,
    /// `end_turn`, `max_tokens`, `tool_use` or `refusal`.
    pub stop_reason: &'static str,
    #[schema(value_type = Option<String>)]
    pub stop_sequence: Option<String>,
    pub usage: MessageUsage,
}

/// As Anthropic counts: `input_tokens` excludes the cache reads and writes, counted apart.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

impl MessageUsage {
    /// Relay's usage (input is every prompt token) in Anthropic's split.
    fn of(usage: &Usage) -> Self {
        let read = usage.cached_input_tokens.unwrap_or(0);
        let written = usage.cache_write_tokens.unwrap_or(0);
        Self {
            input_tokens: usage.input_tokens.saturating_sub(read + written),
            output_tokens: usage.output_tokens,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: written,
        }
    }
}

/// `{type: "error", error: {type, message}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AnthropicErrorBody {
    #[serde(rename = "type")]
    pub kind: String,
    #[schema(value_type = Object)]
    pub error: Value,
}

/// Anthropic Messages. The token is `x-api-key` or `Authorization: Bearer`.
#[utoipa::path(post, path = "/v1/messages", tag = "compatible",
    security(("bearer" = [])),
    params(
        ("x-api-key" = Option<String>, Header, description = "The token, as the Anthropic SDK sends it"),
        ("anthropic-version" = Option<String>, Header, description = "Accepted and ignored"),
        ("anthropic-beta" = Option<String>, Header, description = "Forwarded to `anthropic` providers only"),
        super::doc::ProjectHeaders,
    ),
    request_body = MessagesRequest,
    responses(
        (status = 200, description = "A `message`, or with `stream: true` SSE events `message_start`, `content_block_start`/`delta`/`stop` (text, thinking ended by `signature_delta`, tool_use), `message_delta` with the cache counts, `message_stop` (and `ping`); a failure after `message_start` is an `error` event. `x-relay-note-ids` lists the injected notes. Answered by an `anthropic` provider (the client's own API family), the body or the events are that provider's own, byte for byte.",
            body = MessageOut, headers(("x-relay-note-ids" = String, description = "Ids of the injected notes, comma-separated"))),
        super::doc::MessagesErrors,
    ))]
pub async fn messages(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    door::serve::<Messages>(state, headers, body).await
}

/// The Messages door.
pub struct Messages;

impl Door for Messages {
    const DOOR: crate::domain::Door = crate::domain::Door::Messages;
    type Request = MessagesRequest;
    type Context = ();
    type Answer = Writer;

    fn translate(
        request: MessagesRequest,
        client: &serde_json::Map<String, Value>,
    ) -> Result<Translated<()>, ApiError> {
        let tool_choice = request.tool_choice.as_ref().map(tool_choice).transpose()?;
        let stop = request.stop_sequences.clone().unwrap_or_default();
        let (model, stream) = (request.model.clone(), request.stream);
        let contents = client
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let (conversation, tools) = translate(request, contents)?;
        Ok(Translated {
            leg: DoorLeg {
                conversation,
                tools,
                tool_choice,
                stop,
            },
            model,
            stream,
            context: (),
        })
    }

    fn answer((): (), model: String) -> Writer {
        Writer::new(model)
    }
}

fn bad(at: String, what: &str) -> ApiError {
    ApiError::invalid(format!("{at}: {what}"))
}

/// The text of a string or of `text` blocks (a `tool_result`'s content, the system prompt).
fn plain_text(value: &Value, at: &str) -> Result<String, ApiError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match (b["type"].as_str(), b["text"].as_str()) {
                (Some("text"), Some(t)) => Ok(t),
                _ => Err(bad(at.to_owned(), "only text blocks are supported here")),
            })
            .collect(),
        Value::Null => Ok(String::new()),
        _ => Err(bad(at.to_owned(), "must be a string or an array of blocks")),
    }
}

/// `tool_choice`: `{type: "auto" | "any" | "none"}` or `{type: "tool", name}`.
fn tool_choice(value: &Value) -> Result<ToolChoice, ApiError> {
    match (value["type"].as_str(), value["name"].as_str()) {
        (Some("auto"), _) => Ok(ToolChoice::Auto),
        (Some("any"), _) => Ok(ToolChoice::Required),
        (Some("none"), _) => Ok(ToolChoice::None),
        (Some("tool"), Some(name)) => Ok(ToolChoice::Function(name.to_owned())),
        _ => Err(ApiError::invalid(
            "tool_choice must be {type: auto | any | none} or {type: \"tool\", name}",
        )),
    }
}

/// The request as a leg, and the caller's tools: the tools' schemas are moved from the request,
/// and each message's content is read in the client's parsed `messages` (`contents`), not copied.
fn translate(
    request: MessagesRequest,
    contents: &[Value],
) -> Result<(AgentRequest, Vec<ToolDef>), ApiError> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        let text = plain_text(system, "system")?;
        if !text.is_empty() {
            messages.push(message(MessageRole::System, Some(text)));
        }
    }
    for (i, m) in request.messages.into_iter().enumerate() {
        let one;
        let blocks: &[Value] = match contents.get(i).map(|c| &c["content"]) {
            Some(Value::String(s)) => {
                one = [json!({"type": "text", "text": s})];
                &one
            }
            Some(Value::Array(blocks)) => blocks,
            _ => {
                return Err(bad(
                    format!("messages[{i}].content"),
                    "must be a string or blocks",
                ));
            }
        };
        let mut text = String::new();
        let mut calls = Vec::new();
        // A block's place, spelled only for an error.
        let at = |j: usize| format!("messages[{i}].content[{j}]");
        for (j, b) in blocks.iter().enumerate() {
            match (m.role.as_str(), b["type"].as_str()) {
                (_, Some("text")) => text.push_str(b["text"].as_str().unwrap_or_default()),
                ("assistant", Some("tool_use")) => calls.push(MessageToolCall::Flat(ToolCall {
                    id: b["id"].as_str().unwrap_or_default().to_owned(),
                    name: b["name"].as_str().unwrap_or_default().to_owned(),
                    arguments: b
                        .get("input")
                        .map_or_else(|| "{}".to_owned(), Value::to_string),
                })),
                // Results answer the calls of the assistant message before, so they come first.
                ("user", Some("tool_result")) => messages.push(Message {
                    role: MessageRole::Tool,
                    content: Some(Content::Text(plain_text(&b["content"], &at(j))?)),
                    tool_calls: None,
                    tool_call_id: b["tool_use_id"].as_str().map(str::to_owned),
                }),
                // Thinking is the model's own: it reaches an `anthropic` provider in the
                // client's own body, and is not sent to another model.
                ("assistant", Some("thinking" | "redacted_thinking")) => {}
                _ => return Err(bad(at(j), "unsupported block type for this role")),
            }
        }
        match m.role.as_str() {
            "user" if !text.is_empty() => messages.push(message(MessageRole::User, Some(text))),
            "user" => {}
            // Claude Code puts some reminders in `system` messages between the turns; they join
            // the system text.
            "system" if !text.is_empty() => messages.push(message(MessageRole::System, Some(text))),
            "system" => {}
            "assistant" => messages.push(Message {
                role: MessageRole::Assistant,
                content: (!text.is_empty()).then_some(Content::Text(text)),
                tool_calls: (!calls.is_empty()).then_some(calls),
                tool_call_id: None,
            }),
            other => {
                return Err(bad(
                    format!("messages[{i}].role"),
                    &format!("`{other}` is not user, assistant or system"),
                ));
            }
        }
    }
    let tools: Vec<ToolDef> = request
        .tools
        .into_iter()
        .filter(|t| t.kind.as_deref().is_none_or(|k| k == "custom"))
        .map(|t| ToolDef {
            name: t.name,
            description: t.description.unwrap_or_default(),
            parameters: t.input_schema,
        })
        .collect();
    let leg = AgentRequest {
        messages,
        // The door's tools reach the leg through `legs::validate_door`, checked there.
        tools: Vec::new(),
        tool_role: None,
        model: Some(request.model),
        project_id: None,
        project: None,
        cwd: None,
        git_remote: None,
        root: None,
        max_tokens: Some(request.max_tokens),
        temperature: request.temperature,
    };
    Ok((leg, tools))
}

fn message(role: MessageRole, text: Option<String>) -> Message {
    Message {
        role,
        content: text.map(Content::Text),
        tool_calls: None,
        tool_call_id: None,
    }
}
