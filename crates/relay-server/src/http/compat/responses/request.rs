//! A Responses API request (`POST /v1/responses`) and its translation into a leg: `instructions`
//! and `developer`/`system` messages become the system text, `function_call` /
//! `custom_tool_call` items become an assistant message's tool calls (consecutive calls are one
//! turn's parallel calls), their outputs tool messages; `reasoning` items are dropped (the
//! providers Relay translates to cannot read another model's encrypted reasoning).

use relay_wire::agent::{AgentRequest, Content, Message, MessageRole, MessageToolCall, ToolCall};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::tools::Names;
use crate::error::ApiError;

/// A Responses request. Relay keeps no responses: the whole conversation comes in `input`, and
/// `previous_response_id` is refused. Fields Relay does not use (`include`, `store`, `reasoning`,
/// `parallel_tool_calls`, `prompt_cache_key`, `client_metadata`, `service_tier`, `text`,
/// `truncation`, `metadata`, `user`...) are accepted and ignored.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ResponsesRequest {
    /// `auto` or a configured model name (see `GET /v1/models`).
    pub model: String,
    /// A string (one user message) or an array of items: `message`, `function_call`,
    /// `function_call_output`, `custom_tool_call`, `custom_tool_call_output`, `reasoning`.
    #[schema(value_type = Object)]
    pub input: Value,
    /// The system text.
    #[serde(default)]
    pub instructions: Option<String>,
    /// `function`, `namespace` and `custom` tools; hosted tools are left out.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<Value>,
    /// `auto`, `none`, `required` or `{type: "function" | "custom", name}`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub stream: bool,
    /// Refused with 400: Relay keeps no responses to continue from.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub previous_response_id: Option<Value>,
    /// Accepted; nothing is stored either way.
    #[serde(default)]
    pub store: Option<bool>,
}

fn bad(at: String, what: &str) -> ApiError {
    ApiError::invalid(format!("{at}: {what}"))
}

/// A message's text: a string, or `input_text` / `output_text` / `text` parts joined.
fn text_of(content: &Value, at: &str) -> Result<String, ApiError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                match (part["type"].as_str(), part["text"].as_str()) {
                    (Some("input_text" | "output_text" | "text"), Some(t)) => text.push_str(t),
                    (Some("refusal"), _) => {
                        text.push_str(part["refusal"].as_str().unwrap_or_default());
                    }
                    (kind, _) => {
                        return Err(bad(
                            format!("{at}[{j}]"),
                            &format!(
                                "only text parts are supported, not `{}`",
                                kind.unwrap_or("?")
                            ),
                        ));
                    }
                }
            }
            Ok(text)
        }
        _ => Err(bad(at.to_owned(), "must be a string or an array of parts")),
    }
}

fn message(role: MessageRole, text: String) -> Message {
    Message {
        role,
        content: Some(Content::Text(text)),
        tool_calls: None,
        tool_call_id: None,
    }
}

fn str_field<'a>(item: &'a Value, field: &str, at: &str) -> Result<&'a str, ApiError> {
    item[field]
        .as_str()
        .ok_or_else(|| bad(format!("{at}.{field}"), "a string is required"))
}

/// Adds a call to the assistant turn it belongs to: the previous message when it is the
/// assistant's, else a new assistant message.
fn push_call(messages: &mut Vec<Message>, call: ToolCall) {
    if let Some(last) = messages.last_mut()
        && last.role == MessageRole::Assistant
    {
        last.tool_calls
            .get_or_insert_with(Vec::new)
            .push(MessageToolCall::Flat(call));
        return;
    }
    messages.push(Message {
        role: MessageRole::Assistant,
        content: None,
        tool_calls: Some(vec![MessageToolCall::Flat(call)]),
        tool_call_id: None,
    });
}

fn output_text(item: &Value, at: &str) -> Result<String, ApiError> {
    match &item["output"] {
        Value::Null => Ok(String::new()),
        other => text_of(other, &format!("{at}.output")),
    }
}

/// The conversation as leg messages.
pub fn messages(request: &ResponsesRequest) -> Result<Vec<Message>, ApiError> {
    let mut messages = Vec::new();
    if let Some(instructions) = request.instructions.as_deref().filter(|s| !s.is_empty()) {
        messages.push(message(MessageRole::System, instructions.to_owned()));
    }
    let items = match &request.input {
        Value::String(s) => {
            return Ok([messages, vec![message(MessageRole::User, s.clone())]].concat());
        }
        Value::Array(items) => items,
        _ => return Err(bad("input".into(), "must be a string or an array of items")),
    };
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        // An item without a type is a message (the SDKs' shorthand `{role, content}`).
        match item["type"].as_str().unwrap_or("message") {
            "message" => {
                let role = match item["role"].as_str() {
                    Some("developer" | "system") => MessageRole::System,
                    Some("user") => MessageRole::User,
                    Some("assistant") => MessageRole::Assistant,
                    other => {
                        return Err(bad(
                            format!("{at}.role"),
                            &format!(
                                "`{}` is not one of developer, system, user, assistant",
                                other.unwrap_or("?")
                            ),
                        ));
                    }
                };
                let text = text_of(&item["content"], &format!("{at}.content"))?;
                messages.push(message(role, text));
            }
            "function_call" => {
                let name = str_field(item, "name", &at)?;
                push_call(
                    &mut messages,
                    ToolCall {
                        id: str_field(item, "call_id", &at)?.to_owned(),
                        name: Names::flat(item["namespace"].as_str(), name),
                        arguments: item["arguments"].as_str().unwrap_or("{}").to_owned(),
                    },
                );
            }
            "custom_tool_call" => {
                let input = str_field(item, "input", &at)?;
                push_call(
                    &mut messages,
                    ToolCall {
                        id: str_field(item, "call_id", &at)?.to_owned(),
                        name: Names::flat(
                            item["namespace"].as_str(),
                            str_field(item, "name", &at)?,
                        ),
                        arguments: json!({"input": input}).to_string(),
                    },
                );
            }
            "function_call_output" | "custom_tool_call_output" => {
                messages.push(Message {
                    role: MessageRole::Tool,
                    content: Some(Content::Text(output_text(item, &at)?)),
                    tool_calls: None,
                    tool_call_id: Some(str_field(item, "call_id", &at)?.to_owned()),
                });
            }
            // Encrypted reasoning belongs to the model that wrote it; other providers cannot read it.
            "reasoning" => {}
            // Codex's tools, sent as an input item rather than in `tools`: offered as tools
            // (`declared_tools`), not a message.
            "additional_tools" => {}
            other => {
                return Err(bad(
                    format!("{at}.type"),
                    &format!(
                        "`{other}` items are not supported (Relay keeps no responses to reference, and runs no hosted tools)"
                    ),
                ));
            }
        }
    }
    Ok(messages)
}

/// Every tool the request declares: `tools`, then those of each `additional_tools` input item
/// (Codex 0.171 sends its tools there, and replays earlier turns' items), the first of each name
/// kept.
pub fn declared_tools(request: &ResponsesRequest) -> Vec<Value> {
    let mut tools = request.tools.clone();
    let items = request.input.as_array().map(Vec::as_slice).unwrap_or(&[]);
    for item in items.iter().filter(|i| i["type"] == "additional_tools") {
        for tool in item["tools"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let seen = tools
                .iter()
                .any(|t| t["name"] == tool["name"] && t["type"] == tool["type"]);
            if !seen {
                tools.push(tool.clone());
            }
        }
    }
    tools
}

/// The request as a leg (tools are put in by the caller, already flattened).
pub fn leg_request(request: &ResponsesRequest) -> Result<AgentRequest, ApiError> {
    if request
        .previous_response_id
        .as_ref()
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApiError::invalid(
            "previous_response_id: Relay keeps no responses; send the whole conversation in `input` (with `store: false`)",
        ));
    }
    Ok(AgentRequest {
        messages: messages(request)?,
        tools: Vec::new(),
        tool_role: None,
        model: Some(request.model.clone()),
        project_id: None,
        project: None,
        cwd: None,
        git_remote: None,
        root: None,
        max_tokens: request.max_output_tokens,
        temperature: request.temperature,
    })
}
