//! Provider-side tools and state: tools the provider runs on the operator's key (web search, code
//! execution, MCP servers, ...) and references to what the provider stores (conversations, stored
//! prompts, reasoning by id, audio by id). Off unless the operator allows a tool per model.

use serde_json::{Map, Value};

use super::{Chain, Door, refuse};
use crate::error::ApiError;

/// The tool types a client runs itself (its own functions); every other typed tool is hosted.
fn client_tool(door: Door, kind: Option<&str>) -> bool {
    match door {
        Door::Messages => match kind {
            None | Some("custom") => true,
            // Anthropic's schema-less client tools: the client still runs them.
            Some(k) => ["bash_", "text_editor_", "computer_", "memory_"]
                .iter()
                .any(|p| k.starts_with(p)),
        },
        Door::Agent | Door::ChatCompletions | Door::Responses => {
            matches!(kind, None | Some("function" | "custom" | "namespace"))
        }
    }
}

/// The name a hosted tool is allowed by: its type without a version date
/// (`web_search_20250305` → `web_search`) or `_preview` suffix.
pub fn hosted_tool_name(kind: &str) -> String {
    let base = kind.strip_suffix("_preview").unwrap_or(kind);
    match base.rsplit_once('_') {
        Some((name, date)) if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) => {
            name.to_owned()
        }
        _ => base.to_owned(),
    }
}

/// Search tools agents offer on every call by default (Codex's `web_search`): left out when not
/// allowed, so the agent still works without them, instead of refusing the call.
fn strippable(name: &str) -> bool {
    matches!(name, "web_search" | "web_fetch")
}

/// Removes the search tools the chain does not allow from `tools` (see `strippable`); the
/// names removed, for the log.
pub fn strip_unallowed_search(
    door: Door,
    body: &mut Map<String, Value>,
    chain: Chain<'_>,
) -> Vec<String> {
    let mut removed = Vec::new();
    if let Some(Value::Array(tools)) = body.get_mut("tools") {
        tools.retain(|t| {
            let kind = t.get("type").and_then(Value::as_str);
            if client_tool(door, kind) {
                return true;
            }
            let name = hosted_tool_name(kind.unwrap_or_default());
            if strippable(&name) && !chain.allows_tool(&name) {
                removed.push(name);
                return false;
            }
            true
        });
    }
    if door == Door::ChatCompletions
        && body.contains_key("web_search_options")
        && !chain.allows_tool("web_search")
    {
        body.remove("web_search_options");
        removed.push("web_search".into());
    }
    removed
}

/// Refuses hosted tools the chain does not allow, and every reference to provider-side state.
pub fn check(door: Door, body: &Map<String, Value>, chain: Chain<'_>) -> Result<(), ApiError> {
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        for (i, tool) in tools.iter().enumerate() {
            let kind = tool.get("type").and_then(Value::as_str);
            if client_tool(door, kind) {
                continue;
            }
            let name = hosted_tool_name(kind.unwrap_or_default());
            if !chain.allows_tool(&name) {
                return Err(refuse(
                    &format!("tools[{i}]"),
                    &format!(
                        "`{}` runs at the provider on the operator's key and is not allowed for this model (an operator allows it with [[models]] hosted_tools = [\"{name}\"])",
                        kind.unwrap_or_default()
                    ),
                ));
            }
        }
    }
    if door == Door::ChatCompletions
        && body.contains_key("web_search_options")
        && !chain.allows_tool("web_search")
    {
        return Err(refuse(
            "web_search_options",
            "web search is not allowed for this model",
        ));
    }
    let present = |field: &str| body.get(field).is_some_and(|v| !v.is_null());
    let state: &[(&str, &str)] = match door {
        Door::Messages => &[
            (
                "mcp_servers",
                "MCP servers run at the provider on the operator's key",
            ),
            (
                "container",
                "a code-execution container is state stored at the provider",
            ),
        ],
        Door::Responses => &[
            (
                "conversation",
                "a conversation is state stored at the provider; send the whole input",
            ),
            (
                "prompt",
                "a stored prompt lives at the provider; send its text",
            ),
            (
                "background",
                "a background response runs on at the provider after Relay leaves",
            ),
        ],
        Door::Agent | Door::ChatCompletions => &[],
    };
    for (field, why) in state {
        let on = match *field {
            "background" => body.get(*field).and_then(Value::as_bool) == Some(true),
            "mcp_servers" => body
                .get(*field)
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()),
            _ => present(field),
        };
        if on {
            return Err(refuse(field, why));
        }
    }
    match door {
        Door::Responses => reasoning_by_id(body),
        Door::ChatCompletions => audio_by_id(body),
        Door::Agent | Door::Messages => Ok(()),
    }
}

/// A Responses reasoning item with neither its encrypted content nor its summary only names
/// reasoning stored at the provider.
fn reasoning_by_id(body: &Map<String, Value>) -> Result<(), ApiError> {
    let Some(items) = body.get("input").and_then(Value::as_array) else {
        return Ok(());
    };
    for (i, item) in items.iter().enumerate() {
        if item.get("type").and_then(Value::as_str) != Some("reasoning") {
            continue;
        }
        let has = |f: &str| item.get(f).is_some_and(|v| !v.is_null());
        let summary = item
            .get("summary")
            .and_then(Value::as_array)
            .is_some_and(|s| !s.is_empty());
        if !has("encrypted_content") && !summary && !has("content") {
            return Err(refuse(
                &format!("input[{i}]"),
                "a reasoning item given by id only refers to state stored at the provider; send it with its encrypted_content",
            ));
        }
    }
    Ok(())
}

/// An assistant message's `audio: {id}` names audio stored at the provider.
fn audio_by_id(body: &Map<String, Value>) -> Result<(), ApiError> {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Ok(());
    };
    for (i, m) in messages.iter().enumerate() {
        if m.get("audio").and_then(|a| a.get("id")).is_some() {
            return Err(refuse(
                &format!("messages[{i}].audio.id"),
                "audio by id refers to state stored at the provider",
            ));
        }
    }
    Ok(())
}
