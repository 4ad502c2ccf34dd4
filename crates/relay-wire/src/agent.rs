//! `POST /v1/agent/stream`: the request, its messages, and the NDJSON events (spec §2.5-§2.7, §6;
//! CONTRACT.md). Every line has `event`; exactly one terminal event (`tool_calls`, `done`, `error`)
//! ends every leg and is the last line. Clients ignore unknown fields and unknown event kinds.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ErrorCode;
use crate::tools::{ToolDef, ToolRole};

/// One agent leg.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct AgentRequest {
    /// At least one. Rules across messages (a tool result answers an earlier call, a user message
    /// has content) cannot be written in JSON Schema; a leg that breaks them gets 400.
    #[schema(min_items = 1)]
    pub messages: Vec<Message>,
    /// The tools the client can run. Catalogue tools the role does not allow are removed, allowed
    /// ones are sent with the canonical definition, others pass through unchanged.
    #[serde(default)]
    pub tools: Vec<ToolDef>,
    /// `null` (normal), `worker`, `orchestrator` or `agent_orchestrator`.
    #[serde(default)]
    pub tool_role: Option<ToolRole>,
    /// `auto` (default) or a configured model name.
    #[serde(default)]
    pub model: Option<String>,
    /// The project whose notes are injected.
    #[serde(default)]
    pub project_id: Option<String>,
    /// Legacy alias of `project_id`.
    #[serde(default)]
    pub project: Option<String>,
    /// Without a project id, the project is the first 12 hex characters of the SHA-256 of
    /// `git_remote`, else `root`, else `cwd`.
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub git_remote: Option<String>,
    #[serde(default)]
    pub root: Option<String>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f64>,
}

/// A message's author.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageRole {
    System,
    User,
    Assistant,
    Tool,
}

/// One message of the conversation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Message {
    pub role: MessageRole,
    /// A string or an array of `{type: "text", text}` parts; may be null on an assistant message
    /// that only calls tools.
    #[serde(default)]
    pub content: Option<Content>,
    /// On assistant messages: the calls exactly as the `tool_calls` event gave them (the OpenAI
    /// nested form is accepted too).
    #[serde(default)]
    pub tool_calls: Option<Vec<MessageToolCall>>,
    /// On tool messages: the id of the call this is the result of.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// Message content.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl Content {
    /// The text of the content; parts are joined without separator.
    pub fn text(&self) -> String {
        match self {
            Self::Text(t) => t.clone(),
            Self::Parts(parts) => parts.iter().map(|p| p.text.as_str()).collect(),
        }
    }

    /// As `text`, taking the content: a plain text is moved, not copied.
    pub fn into_text(self) -> String {
        match self {
            Self::Text(t) => t,
            Self::Parts(parts) => parts.iter().map(|p| p.text.as_str()).collect(),
        }
    }
}

/// A content part; only `text` parts exist.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: ContentPartKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ContentPartKind {
    Text,
}

/// A tool call on an assistant message, flat or in the OpenAI nested form.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum MessageToolCall {
    Flat(ToolCall),
    Nested(NestedToolCall),
}

impl MessageToolCall {
    /// The call in the flat form.
    pub fn flat(&self) -> ToolCall {
        self.clone().into_flat()
    }

    /// As `flat`, taking the call: its strings are moved, not copied.
    pub fn into_flat(self) -> ToolCall {
        match self {
            Self::Flat(c) => c,
            Self::Nested(n) => ToolCall {
                id: n.id,
                name: n.function.name,
                arguments: n.function.arguments,
            },
        }
    }
}

/// `{id, type: "function", function: {name, arguments}}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NestedToolCall {
    pub id: String,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    pub function: NestedFunction,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NestedFunction {
    pub name: String,
    pub arguments: String,
}

/// A tool call (spec §2.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ToolCall {
    /// Pairs the call with its result.
    pub id: String,
    pub name: String,
    /// A complete JSON-encoded string; `"{}"` for a call without arguments.
    pub arguments: String,
}

/// The provider's token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct Usage {
    /// Every prompt token, those read from or written to the provider's prompt cache included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's prompt cache (Anthropic's
    /// `cache_read_input_tokens`, OpenAI's `cached_tokens`, Gemini's `cachedContentTokenCount`);
    /// part of `input_tokens`. Absent when the provider reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Prompt tokens written to the provider's prompt cache (Anthropic's
    /// `cache_creation_input_tokens`); part of `input_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Output tokens spent reasoning; part of `output_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// Why a leg ended with `done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    ContentFilter,
}

/// An OpenAI Responses reasoning item as the provider sent it, to be given back unchanged in a
/// later turn (`store: false` callers keep their reasoning only this way). The opening line has
/// the `id` alone; the closing line adds the item's final `encrypted_content` (when the caller
/// asked for it) and its `summary` parts. Only a Responses provider's items have this form:
/// another API's signatures never carry one, and this is never sent as another API's signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReasoningItem {
    /// The provider's item id (`rs_...`).
    pub id: String,
    /// The opaque reasoning the provider encrypted, byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
    /// The summary parts' texts, in order; absent on the opening line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Vec<String>>,
    /// The item's `reasoning_text` content parts (local servers such as LM Studio put the
    /// reasoning there); absent on the opening line and when the item had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<String>>,
}

/// One NDJSON line of `POST /v1/agent/stream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// First line: the concrete model, and the notes injected.
    Start {
        request_id: String,
        /// The configured model name (`[[models]] name`), never `auto`.
        model: String,
        /// The project whose notes were considered; null when the request named none.
        project_id: Option<String>,
        notes: u32,
        note_ids: Vec<String>,
    },
    /// A piece of the answer.
    Text { text: String },
    /// A piece of the model's visible reasoning. Anthropic's thinking blocks end with a line
    /// carrying `signature` (and empty `text`); an encrypted block is one line with `redacted`.
    /// OpenAI Responses reasoning items open and close with a line carrying `item` (and empty
    /// `text`); their summary text comes between as ordinary reasoning lines.
    Reasoning {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        redacted: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<ReasoningItem>,
    },
    /// Keep-alive after 15 s without another line.
    Ping,
    /// Terminal: the model wants tools run by the client.
    ToolCalls { calls: Vec<ToolCall>, usage: Usage },
    /// Terminal: the answer is complete.
    Done {
        finish_reason: FinishReason,
        usage: Usage,
    },
    /// Terminal: a failure after the headers were sent.
    Error {
        error: ErrorCode,
        message: String,
        /// Whether the same leg may succeed if sent again.
        retryable: bool,
    },
}

impl AgentEvent {
    /// Whether this event ends the leg.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::ToolCalls { .. } | Self::Done { .. } | Self::Error { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_serialise_with_the_event_tag() {
        let e = AgentEvent::Text { text: "hi".into() };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"event": "text", "text": "hi"})
        );
        assert_eq!(
            serde_json::to_value(AgentEvent::Ping).unwrap(),
            json!({"event": "ping"})
        );
        let e = AgentEvent::Error {
            error: ErrorCode::UpstreamError,
            message: "m".into(),
            retryable: true,
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"event": "error", "error": "upstream_error", "message": "m", "retryable": true})
        );
    }

    #[test]
    fn both_tool_call_forms_parse() {
        let flat: MessageToolCall =
            serde_json::from_value(json!({"id": "c1", "name": "grep", "arguments": "{}"})).unwrap();
        let nested: MessageToolCall = serde_json::from_value(
            json!({"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}),
        )
        .unwrap();
        assert_eq!(flat.flat(), nested.flat());
    }
}
