//! `POST /v1/chat/completions`: OpenAI's Chat Completions, streamed (SSE `data:` chunks ending
//! with `[DONE]`) and not, answered by whichever model the leg machinery routes to.
//!
//! This file reads the request; `stream.rs` encodes the answer.

mod stream;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use relay_wire::agent::{
    AgentRequest, Content, Message, MessageRole, MessageToolCall, NestedToolCall,
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

/// A Chat Completions request. Relay reads the fields below; every field it does not own
/// (`prompt_cache_key`, `reasoning_effort`, `service_tier`, `parallel_tool_calls`, `user`,
/// `top_p`, `seed`...) reaches an `openai` provider unchanged.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatCompletionRequest {
    /// `auto` or a configured model name (see `GET /v1/models`).
    pub model: String,
    #[schema(min_items = 1)]
    pub messages: Vec<ChatMessageIn>,
    #[serde(default)]
    pub tools: Vec<ChatTool>,
    /// `auto`, `none`, `required` or `{type: "function", function: {name}}`, forwarded in the
    /// answering provider's own form.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Preferred over `max_tokens` when both are given.
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f64>,
    /// A string or up to 4 strings, forwarded to the provider (the Responses API has none).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub stop: Option<Value>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct StreamOptions {
    /// Adds a last chunk with `usage` and no choices.
    #[serde(default)]
    pub include_usage: bool,
}

/// A message of any role: `system`/`developer`, `user`, `assistant`, `tool`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatMessageIn {
    pub role: String,
    /// A string, an array of `{type: "text", text}` parts, or null on an assistant message with tool calls.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub content: Option<Value>,
    #[serde(default)]
    pub tool_calls: Option<Vec<NestedToolCall>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// `{type: "function", function: {name, description, parameters}}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatTool {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    pub function: FunctionDef,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct FunctionDef {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub parameters: Option<Value>,
}

/// A non-streamed answer (`object: "chat.completion"`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatCompletion {
    pub id: String,
    pub object: &'static str,
    pub created: i64,
    /// The configured model that answered (never `auto`).
    pub model: String,
    pub choices: Vec<Choice>,
    pub usage: CompletionUsage,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Choice {
    pub index: u32,
    pub message: AssistantMessage,
    /// `stop`, `length`, `tool_calls` or `content_filter`.
    pub finish_reason: &'static str,
    #[schema(value_type = Object)]
    pub logprobs: Option<Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AssistantMessage {
    pub role: &'static str,
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<NestedToolCall>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CompletionUsage {
    /// Every prompt token, the cached ones included.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// `{cached_tokens}`: the prompt tokens read from the provider's prompt cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub prompt_tokens_details: Option<Value>,
    /// `{reasoning_tokens}` where the provider counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub completion_tokens_details: Option<Value>,
}

/// `{error: {message, type, param, code}}`; `code` is Relay's machine code.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiErrorBody {
    #[schema(value_type = Object)]
    pub error: Value,
}

/// OpenAI Chat Completions.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "compatible",
    security(("bearer" = [])),
    params(
        super::doc::ProjectHeaders,
    ),
    request_body = ChatCompletionRequest,
    responses(
        (status = 200, description = "A `chat.completion`, or with `stream: true` SSE `chat.completion.chunk`s then `data: [DONE]`; a failure after the first chunk is a `data: {error}` chunk. `x-relay-note-ids` lists the injected notes. Answered by an `openai` provider (the client's own API family), the body or the events are that provider's own, byte for byte.",
            body = ChatCompletion, headers(("x-relay-note-ids" = String, description = "Ids of the injected notes, comma-separated"))),
        super::doc::ChatErrors,
    ))]
pub async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    door::serve::<ChatCompletions>(state, headers, body).await
}

/// The Chat Completions door.
pub struct ChatCompletions;

/// What the answer needs from the request.
pub struct Context {
    /// `stream_options.include_usage`: a last chunk with the usage.
    include_usage: bool,
}

impl Door for ChatCompletions {
    const DOOR: crate::domain::Door = crate::domain::Door::ChatCompletions;
    type Request = ChatCompletionRequest;
    type Context = Context;
    type Answer = Writer;

    fn translate(
        request: ChatCompletionRequest,
        _client: &serde_json::Map<String, Value>,
    ) -> Result<Translated<Context>, ApiError> {
        let (conversation, tools) = translate(&request)?;
        Ok(Translated {
            leg: DoorLeg {
                conversation,
                tools,
                tool_choice: request.tool_choice.as_ref().map(tool_choice).transpose()?,
                stop: stop(request.stop.as_ref())?,
            },
            model: request.model,
            stream: request.stream,
            context: Context {
                include_usage: request.stream_options.is_some_and(|o| o.include_usage),
            },
        })
    }

    fn answer(context: Context, model: String) -> Writer {
        Writer::new(model, context.include_usage)
    }
}

/// The request as a leg, and the caller's tools.
fn translate(request: &ChatCompletionRequest) -> Result<(AgentRequest, Vec<ToolDef>), ApiError> {
    let mut messages = Vec::with_capacity(request.messages.len());
    for (i, m) in request.messages.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => MessageRole::System,
            "user" => MessageRole::User,
            "assistant" => MessageRole::Assistant,
            "tool" => MessageRole::Tool,
            other => {
                return Err(ApiError::invalid(format!(
                    "messages[{i}].role `{other}` is not one of system, developer, user, assistant, tool"
                )));
            }
        };
        messages.push(Message {
            role,
            content: content(m.content.as_ref())
                .map_err(|what| ApiError::invalid(format!("messages[{i}].content: {what}")))?,
            tool_calls: m
                .tool_calls
                .as_ref()
                .map(|calls| calls.iter().cloned().map(MessageToolCall::Nested).collect()),
            tool_call_id: m.tool_call_id.clone(),
        });
    }
    let tools: Vec<ToolDef> = request
        .tools
        .iter()
        .map(|t| ToolDef {
            name: t.function.name.clone(),
            description: t.function.description.clone().unwrap_or_default(),
            parameters: t
                .function
                .parameters
                .clone()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        })
        .collect();
    let leg = AgentRequest {
        messages,
        // The door's tools reach the leg through `legs::validate_door`, checked there.
        tools: Vec::new(),
        tool_role: None,
        model: Some(request.model.clone()),
        project_id: None,
        project: None,
        cwd: None,
        git_remote: None,
        root: None,
        max_tokens: request.max_completion_tokens.or(request.max_tokens),
        temperature: request.temperature,
    };
    Ok((leg, tools))
}

/// `stop`: a string or an array of up to 4 strings.
fn stop(value: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let bad = || ApiError::invalid("stop must be a string or an array of up to 4 strings");
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) if items.len() <= 4 => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// `tool_choice`: `auto`, `none`, `required` or `{type: "function", function: {name}}`.
fn tool_choice(value: &Value) -> Result<ToolChoice, ApiError> {
    match (
        value.as_str(),
        value["type"].as_str(),
        value["function"]["name"].as_str(),
    ) {
        (Some("auto"), ..) => Ok(ToolChoice::Auto),
        (Some("none"), ..) => Ok(ToolChoice::None),
        (Some("required"), ..) => Ok(ToolChoice::Required),
        (None, Some("function"), Some(name)) => Ok(ToolChoice::Function(name.to_owned())),
        _ => Err(ApiError::invalid(
            "tool_choice must be auto, none, required or {type: \"function\", function: {name}}",
        )),
    }
}

/// A string, or text parts joined; other part kinds (images, audio) are refused.
fn content(value: Option<&Value>) -> Result<Option<Content>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(Content::Text(s.clone()))),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(t))) => text.push_str(t),
                    _ => {
                        return Err(
                            "only text parts (`{type: \"text\", text}`) are supported".into()
                        );
                    }
                }
            }
            Ok(Some(Content::Text(text)))
        }
        Some(_) => Err("must be a string or an array of text parts".into()),
    }
}
