//! Validation of an agent leg, once, at the boundary: roles and content forms, tool-call pairing,
//! tools, sampling values and the project. A leg refused here costs no quota.

use std::collections::HashSet;
use std::sync::Arc;

use relay_wire::agent::{AgentRequest, Message, MessageRole};
use relay_wire::tools::{ToolDef, gate};
use sha2::{Digest, Sha256};

use crate::domain::ProjectId;
use crate::error::ApiError;
use crate::providers::passthrough::Passthrough;
use crate::providers::{ChatMessage, ChatRequest, ToolCall, ToolChoice, ToolSpec};

/// A leg that passed validation, before a model is chosen.
#[derive(Debug)]
pub struct ValidLeg {
    /// The client's system text (injected notes are added later).
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    /// Set only by the compatible endpoints; a native leg has neither.
    pub stop: Vec<String>,
    pub tool_choice: Option<ToolChoice>,
    /// Whose notes are injected; `None` when the request names and implies no project.
    pub project_id: Option<ProjectId>,
    /// The conversation's first user message: what injected notes are ranked against, so the
    /// block stays byte-identical across the legs of one conversation.
    pub first_user_text: String,
    /// The client's own request, for a provider of its API family: set by the compatible
    /// doors (always), never by the native route. It names the door (`door`).
    pub passthrough: Option<Arc<Passthrough>>,
    /// A stable key per user and conversation, for providers with keyed prompt caches.
    pub cache_key: Option<String>,
    /// The prompt's size in tokens before the provider counts it (budget reservations, and the
    /// record of a leg whose provider never reported its usage).
    pub prompt_estimate: u64,
    /// The service tier a compatible client asked for (priced per `[[models]]`).
    pub service_tier: Option<String>,
}

impl ValidLeg {
    /// The door the leg came in by: the compatible door whose body it carries, else the native
    /// route. One value, so the record's route and the family a provider is matched on agree.
    pub fn door(&self) -> crate::domain::Door {
        self.passthrough
            .as_deref()
            .map_or(crate::domain::Door::Agent, |p| p.door)
    }

    /// The provider request for one model of `kind`, with the notes block (if any) to place.
    /// A provider of the client's own API family is sent the client's body, so the translated
    /// conversation is not copied for it.
    pub fn to_chat(&self, upstream: &str, kind: &str, notes: Option<String>) -> ChatRequest {
        let same_family = self
            .passthrough
            .as_deref()
            .is_some_and(|p| p.for_kind(kind).is_some());
        let (system, messages, tools) = if same_family {
            (None, Vec::new(), Vec::new())
        } else {
            (
                self.system.clone(),
                self.messages.clone(),
                self.tools.clone(),
            )
        };
        ChatRequest {
            model: upstream.to_owned(),
            system,
            notes,
            messages,
            tools,
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            stop: self.stop.clone(),
            tool_choice: self.tool_choice.clone(),
            passthrough: self.passthrough.clone(),
            cache_key: self.cache_key.clone(),
        }
    }

    /// Sets `cache_key` from the user and the conversation's first user message: the same for
    /// every leg of one conversation, different across users.
    pub fn key_cache(&mut self, user_id: &str) {
        let mut hash = Sha256::new();
        hash.update(user_id.as_bytes());
        hash.update([0]);
        hash.update(self.first_user_text.as_bytes());
        self.cache_key = Some(format!("relay-{}", &hex::encode(hash.finalize())[..32]));
    }
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::invalid(message.into())
}

/// Tool names the providers accept (OpenAI's rule is the strictest).
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The rules every offered tool follows: a name the providers accept and a JSON Schema object.
pub fn check_tools(tools: &[ToolDef]) -> Result<(), ApiError> {
    for (i, t) in tools.iter().enumerate() {
        if !valid_tool_name(&t.name) {
            return Err(bad(format!(
                "tools[{i}].name must be 1 to 64 letters, digits, '_' or '-'"
            )));
        }
        if !t.parameters.is_object() {
            return Err(bad(format!(
                "tools[{i}].parameters must be a JSON Schema object"
            )));
        }
    }
    Ok(())
}

/// The project a leg's notes come from: `project_id`/`project`, else the first 12 hex characters of
/// the SHA-256 of `git_remote`, else `root`, else `cwd` (unnormalised, as the client computes it).
pub fn project_of(req: &AgentRequest) -> Result<Option<ProjectId>, ApiError> {
    if let Some(p) =
        ProjectId::from_pair(req.project_id.as_deref(), req.project.as_deref()).map_err(bad)?
    {
        return Ok(Some(p));
    }
    project_from(
        None,
        [&req.git_remote, &req.root, &req.cwd]
            .into_iter()
            .flatten()
            .map(String::as_str),
    )
}

/// The project named by `id`, else derived from the first non-empty of `sources` (git remote,
/// root, cwd, in that order of preference): the first 12 hex characters of its SHA-256.
pub fn project_from<'a>(
    id: Option<&str>,
    sources: impl IntoIterator<Item = &'a str>,
) -> Result<Option<ProjectId>, ApiError> {
    if let Some(p) = ProjectId::from_pair(id, None).map_err(bad)? {
        return Ok(Some(p));
    }
    let source = sources.into_iter().find(|s| !s.is_empty());
    // Twelve hex characters always make a valid id; `parse` keeps the one way in.
    source
        .map(|s| ProjectId::parse(&hex::encode(Sha256::digest(s.as_bytes()))[..12]).map_err(bad))
        .transpose()
}

/// A request's conversation, checked: roles and content forms, tool-call pairing, sampling.
struct Conversation {
    system: Option<String>,
    messages: Vec<ChatMessage>,
    first_user_text: String,
    prompt_estimate: u64,
}

/// The messages are taken (their texts moved into the leg's, not copied); `max_tokens` and
/// `temperature` are the request's.
fn conversation(
    req_messages: Vec<Message>,
    max_tokens: Option<u32>,
    temperature: Option<f64>,
) -> Result<Conversation, ApiError> {
    if req_messages.is_empty() {
        return Err(bad("messages must not be empty"));
    }
    let mut system: Vec<String> = Vec::new();
    let mut messages = Vec::with_capacity(req_messages.len());
    let mut calls_seen: HashSet<String> = HashSet::new();
    let mut first_user_text: Option<String> = None;
    for (i, m) in req_messages.into_iter().enumerate() {
        let at = |what: &str| format!("messages[{i}]: {what}");
        if m.tool_calls.is_some() && m.role != MessageRole::Assistant {
            return Err(bad(at("only assistant messages carry tool_calls")));
        }
        let text = m.content.map(relay_wire::agent::Content::into_text);
        match m.role {
            MessageRole::System => {
                system.push(text.ok_or_else(|| bad(at("a system message needs content")))?);
            }
            MessageRole::User => {
                let text = text.ok_or_else(|| bad(at("a user message needs content")))?;
                first_user_text.get_or_insert_with(|| text.clone());
                messages.push(ChatMessage::User { content: text });
            }
            MessageRole::Assistant => {
                let mut tool_calls = Vec::new();
                for (j, call) in m.tool_calls.into_iter().flatten().enumerate() {
                    let c = call.into_flat();
                    if c.id.is_empty() || !valid_tool_name(&c.name) {
                        return Err(bad(at(&format!(
                            "tool_calls[{j}] needs an id and a valid name"
                        ))));
                    }
                    // Checked, not kept: nothing is built from the arguments here.
                    if serde_json::from_str::<serde::de::IgnoredAny>(&c.arguments).is_err() {
                        return Err(bad(at(&format!(
                            "tool_calls[{j}].arguments is not a JSON string"
                        ))));
                    }
                    if !calls_seen.insert(c.id.clone()) {
                        return Err(bad(at(&format!(
                            "tool_calls[{j}] repeats the call id `{}`",
                            c.id
                        ))));
                    }
                    tool_calls.push(ToolCall {
                        id: c.id,
                        name: c.name,
                        arguments: c.arguments,
                    });
                }
                if text.is_none() && tool_calls.is_empty() {
                    return Err(bad(at("an assistant message needs content or tool_calls")));
                }
                messages.push(ChatMessage::Assistant {
                    content: text.unwrap_or_default(),
                    tool_calls,
                });
            }
            MessageRole::Tool => {
                let id = m
                    .tool_call_id
                    .ok_or_else(|| bad(at("a tool message needs tool_call_id")))?;
                if !calls_seen.contains(&id) {
                    return Err(bad(at(&format!(
                        "tool_call_id `{id}` matches no tool call of an earlier assistant message"
                    ))));
                }
                messages.push(ChatMessage::Tool {
                    tool_call_id: id,
                    content: text.unwrap_or_default(),
                });
            }
        }
    }
    if messages.is_empty() {
        return Err(bad(
            "messages need at least one user, assistant or tool message",
        ));
    }
    if max_tokens == Some(0) {
        return Err(bad("max_tokens must be at least 1"));
    }
    if let Some(t) = temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(bad("temperature must be between 0 and 2"));
    }
    let prompt_estimate = estimate_tokens(&system, &messages);
    Ok(Conversation {
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages,
        first_user_text: first_user_text.unwrap_or_default(),
        prompt_estimate,
    })
}

/// A native leg (`POST /v1/agent/stream`), validated once at the boundary.
pub fn validate(mut req: AgentRequest) -> Result<ValidLeg, ApiError> {
    let messages = std::mem::take(&mut req.messages);
    let c = conversation(messages, req.max_tokens, req.temperature)?;
    check_tools(&req.tools)?;
    let tools = gate(req.tool_role, &req.tools)
        .into_iter()
        .map(spec)
        .collect();
    Ok(ValidLeg {
        system: c.system,
        messages: c.messages,
        tools,
        max_tokens: req.max_tokens,
        temperature: req.temperature,
        stop: Vec::new(),
        tool_choice: None,
        project_id: project_of(&req)?,
        first_user_text: c.first_user_text,
        passthrough: None,
        cache_key: None,
        prompt_estimate: c.prompt_estimate,
        service_tier: None,
    })
}

/// What a compatible door makes of its request: the conversation in the native form (messages,
/// `max_tokens`, `temperature`; its `tools` left empty) and what the native form has no field
/// for. The caller's tools are moved in unchanged (the catalogue's role gating is for Relay's own
/// agents) after the same checks a native leg's get.
pub struct DoorLeg {
    pub conversation: AgentRequest,
    pub tools: Vec<ToolDef>,
    pub tool_choice: Option<ToolChoice>,
    pub stop: Vec<String>,
}

/// What the door's sequence knows of the call besides the translation: the project (from the
/// headers), the client's own body for a same-family provider (which names the door), the
/// prompt's size from the body's, and the service tier asked for.
pub struct DoorCall {
    pub project_id: Option<ProjectId>,
    pub passthrough: Arc<Passthrough>,
    pub prompt_estimate: u64,
    pub service_tier: Option<String>,
}

/// A compatible door's leg, validated once with everything it carries: nothing is derived and
/// then overwritten.
pub fn validate_door(leg: DoorLeg, call: DoorCall) -> Result<ValidLeg, ApiError> {
    let c = conversation(
        leg.conversation.messages,
        leg.conversation.max_tokens,
        leg.conversation.temperature,
    )?;
    check_tools(&leg.tools)?;
    Ok(ValidLeg {
        system: c.system,
        messages: c.messages,
        tools: leg.tools.into_iter().map(spec).collect(),
        max_tokens: leg.conversation.max_tokens,
        temperature: leg.conversation.temperature,
        stop: leg.stop,
        tool_choice: leg.tool_choice,
        project_id: call.project_id,
        first_user_text: c.first_user_text,
        passthrough: Some(call.passthrough),
        cache_key: None,
        prompt_estimate: call.prompt_estimate,
        service_tier: call.service_tier,
    })
}

fn spec(t: ToolDef) -> ToolSpec {
    ToolSpec {
        name: t.name,
        description: t.description,
        parameters: t.parameters,
    }
}

/// About four characters a token over the system text and the messages' text and arguments.
fn estimate_tokens(system: &[String], messages: &[ChatMessage]) -> u64 {
    let chars: usize = system.iter().map(String::len).sum::<usize>()
        + messages
            .iter()
            .map(|m| match m {
                ChatMessage::User { content } | ChatMessage::Tool { content, .. } => content.len(),
                ChatMessage::Assistant {
                    content,
                    tool_calls,
                } => {
                    content.len()
                        + tool_calls
                            .iter()
                            .map(|c| c.arguments.len() + c.name.len())
                            .sum::<usize>()
                }
            })
            .sum::<usize>();
    (chars as u64).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(v: serde_json::Value) -> AgentRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn project_comes_from_id_then_git_remote_root_cwd() {
        let r = req(json!({"messages": [], "project": "p1", "cwd": "/x"}));
        let id = |r: &AgentRequest| project_of(r).unwrap().map(|p| p.as_str().to_owned());
        assert_eq!(id(&r).as_deref(), Some("p1"));
        let r = req(
            json!({"messages": [], "cwd": "/home/a/proj", "root": "/home/a/proj", "git_remote": "git@github.com:a/b.git"}),
        );
        let expected = hex::encode(Sha256::digest(b"git@github.com:a/b.git"))[..12].to_owned();
        assert_eq!(id(&r), Some(expected));
        let r = req(json!({"messages": [], "cwd": "/home/a/proj"}));
        assert_eq!(id(&r).unwrap().len(), 12);
        assert_eq!(id(&req(json!({"messages": []}))), None);
    }

    #[test]
    fn tool_results_must_pair_with_earlier_calls() {
        let ok = req(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{\"pattern\":\"x\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"}
        ]}));
        assert!(validate(ok).is_ok());
        let orphan = req(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "c9", "content": "found"}
        ]}));
        assert!(validate(orphan).unwrap_err().message.contains("c9"));
    }
}
