//! The client's own request, kept beside the normalised one so that a provider of the same API
//! family receives every field the client set (cache breakpoints, thinking and its signed
//! blocks, sampling and caching options) instead of Relay's translation of them.
//!
//! Relay still owns `model` (replaced by the provider's `upstream`), the stream flag, and the
//! notes block, which the adapter places after the client's own system prompt.

use serde_json::{Map, Value, json};

use super::ChatRequest;
pub use super::outgoing::{Outgoing, RawBody};

pub use crate::domain::Door;

/// What a same-family provider is sent instead of a translation.
#[derive(Debug, Clone, PartialEq)]
pub struct Passthrough {
    /// The door the client came in by (never the native one): the API family it speaks.
    pub door: Door,
    /// The client's request body as it arrived (with the pass-through policy's changes).
    pub body: Map<String, Value>,
    /// Its bytes, for the fields the policy left as they were.
    pub bytes: RawBody,
    /// `anthropic-beta`, sent to `anthropic` providers only.
    pub anthropic_beta: Option<String>,
    /// The client streams: a provider of its family sends it its own events, byte for byte
    /// (`ProviderEvent::Raw`).
    pub raw: bool,
}

impl Passthrough {
    /// The client's body for a provider of `kind`, when that provider speaks the client's family.
    pub fn for_kind(&self, kind: &str) -> Option<&Map<String, Value>> {
        self.door.spoken_by(kind).then_some(&self.body)
    }

    /// The client's body as a provider of `kind` is sent it, when that provider speaks the
    /// client's family: every field Relay leaves alone written as the client's own bytes.
    pub fn outgoing(&self, kind: &str) -> Option<Outgoing<'_>> {
        self.for_kind(kind)
            .map(|body| Outgoing::borrowed(body).with_raw(&self.bytes))
    }
}

/// Whether a provider of `kind` streams its own events to the client of `request`.
pub fn raw_for(request: &ChatRequest, kind: &str) -> bool {
    request
        .passthrough
        .as_deref()
        .is_some_and(|p| p.raw && p.for_kind(kind).is_some())
}

/// Whether a same-family provider is asked to stream: when the client did (its own events
/// reach it as they come); a client that did not gets the provider's whole answer
/// (`providers::whole`).
fn streams(request: &ChatRequest) -> bool {
    request.passthrough.as_deref().is_none_or(|p| p.raw)
}

/// Whether a Chat Completions client asked for the usage chunk (`stream_options.include_usage`),
/// which Relay asks for on its own account either way.
pub fn usage_chunk_asked(request: &ChatRequest) -> bool {
    request.passthrough.as_deref().is_some_and(|p| {
        p.body
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    })
}

/// How many `cache_control` markers a Messages body carries (tools, system, message blocks).
pub fn breakpoints(body: &Map<String, Value>) -> usize {
    count_breakpoints(|key| body.get(key))
}

fn count_breakpoints<'v>(get: impl Fn(&str) -> Option<&'v Value>) -> usize {
    let marked = |v: &Value| usize::from(v.get("cache_control").is_some_and(|c| !c.is_null()));
    let blocks = |v: Option<&Value>| -> usize {
        v.and_then(Value::as_array)
            .map_or(0, |items| items.iter().map(marked).sum())
    };
    let messages = get("messages")
        .and_then(Value::as_array)
        .map_or(0, |ms| ms.iter().map(|m| blocks(m.get("content"))).sum());
    blocks(get("tools")) + blocks(get("system")) + messages
}

/// The Anthropic marker Relay adds: the default five-minute ephemeral cache.
pub fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Puts a breakpoint on the last block of `blocks` (an array of Messages blocks), unless it
/// already has one; `true` when one was added.
pub fn mark_last(blocks: &mut Value) -> bool {
    let Some(last) = blocks.as_array_mut().and_then(|b| b.last_mut()) else {
        return false;
    };
    let Some(last) = last.as_object_mut() else {
        return false;
    };
    if last.contains_key("cache_control") {
        return false;
    }
    last.insert("cache_control".into(), ephemeral());
    true
}

/// Gives a Messages body Relay's breakpoints where the client set none: the end of the tools,
/// the end of `system_blocks_stable` system blocks (the client's own, before the notes), and
/// the newest message (rolling), never exceeding Anthropic's four in all.
pub fn add_breakpoints(body: &mut Outgoing<'_>, system_blocks_stable: usize) {
    if count_breakpoints(|key| body.get(key)) > 0 {
        // A client that marks its own prefix knows where it is stable.
        return;
    }
    let mut budget = 4usize;
    if let Some(tools) = body.get_mut("tools")
        && mark_last(tools)
    {
        budget -= 1;
    }
    if let Some(Value::Array(system)) = body.get_mut("system")
        && budget > 0
        && system_blocks_stable > 0
        && let Some(block) = system
            .get_mut(system_blocks_stable - 1)
            .and_then(Value::as_object_mut)
    {
        block.insert("cache_control".into(), ephemeral());
        budget -= 1;
    }
    if budget > 0
        && let Some(last) = body
            .get_mut("messages")
            .and_then(Value::as_array_mut)
            .and_then(|m| m.last_mut())
    {
        if let Some(text) = last.get("content").and_then(Value::as_str) {
            let text = text.to_owned();
            last["content"] = json!([{"type": "text", "text": text}]);
        }
        if let Some(content) = last.get_mut("content") {
            mark_last(content);
        }
    }
}

/// The Messages body for an `anthropic` provider: the client's own when it spoke Messages,
/// else `translated` (Relay's form). Either way the notes block is a system block of its own
/// after the client's, and a body without markers gets Relay's breakpoints.
pub fn messages_body<'a>(
    request: &'a ChatRequest,
    translated: impl FnOnce() -> Value,
) -> Outgoing<'a> {
    let mut body = match request
        .passthrough
        .as_deref()
        .and_then(|p| p.outgoing("anthropic"))
    {
        Some(mut body) => {
            body.set("model", Value::String(request.model.clone()));
            body.set("stream", Value::Bool(streams(request)));
            if let Some(cap) = request.max_tokens {
                body.clamp_output(cap, "max_tokens");
            }
            drop_unsigned_thinking(&mut body);
            body
        }
        None => {
            let mut body = match translated() {
                Value::Object(body) => body,
                _ => Map::new(),
            };
            body.remove("system");
            if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
                body.insert("system".into(), json!([{"type": "text", "text": system}]));
            }
            Outgoing::owned(body)
        }
    };
    // System blocks (a string becomes one), then the notes after them.
    let stable = match body.remove("system") {
        Some(Value::String(s)) if !s.is_empty() => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    let stable_len = stable.len();
    let mut system = stable;
    if let Some(notes) = request.notes.as_deref() {
        system.push(json!({"type": "text", "text": notes}));
    }
    if !system.is_empty() {
        body.set("system", Value::Array(system));
    }
    add_breakpoints(&mut body, stable_len);
    body
}

/// Thinking that another provider produced (on an earlier turn answered elsewhere) reaches the
/// client unsigned; Anthropic refuses such a block, so it is not sent back. The messages are
/// copied only when there is such a block.
fn drop_unsigned_thinking(body: &mut Outgoing<'_>) {
    let unsigned =
        |b: &Value| b["type"] == "thinking" && b["signature"].as_str().is_none_or(str::is_empty);
    let any = body
        .get("messages")
        .and_then(Value::as_array)
        .is_some_and(|ms| {
            ms.iter().any(|m| {
                m.get("content")
                    .and_then(Value::as_array)
                    .is_some_and(|blocks| blocks.iter().any(unsigned))
            })
        });
    if !any {
        return;
    }
    let messages = body.get_mut("messages").and_then(Value::as_array_mut);
    for m in messages.into_iter().flatten() {
        if let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) {
            blocks.retain(|b| !unsigned(b));
        }
    }
}

/// The Chat Completions body for an `openai` provider: the client's own when it spoke Chat
/// Completions (usage asked for, the notes as a system message after the client's leading
/// ones), else `translated`; `prompt_cache_key` added for OpenAI's own API where the client set none.
pub fn chat_body<'a>(
    request: &'a ChatRequest,
    translated: impl FnOnce() -> Value,
    base_url: &str,
) -> Outgoing<'a> {
    let send_key = keyed(base_url);
    let Some(mut body) = request
        .passthrough
        .as_deref()
        .and_then(|p| p.outgoing("openai"))
    else {
        return with_cache_key(owned(translated()), request, send_key);
    };
    body.set("model", Value::String(request.model.clone()));
    let stream = streams(request);
    body.set("stream", Value::Bool(stream));
    if let Some(cap) = request.max_tokens {
        // OpenAI's own API takes the newer field; compatible servers know the older one.
        let field = if send_key {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.clamp_output(cap, field);
    }
    // A whole answer always carries its usage, and OpenAI refuses `stream_options` without a
    // stream.
    if stream {
        let options = match body.remove("stream_options") {
            Some(Value::Object(mut options)) => {
                options.insert("include_usage".into(), Value::Bool(true));
                Value::Object(options)
            }
            _ => json!({"include_usage": true}),
        };
        body.set("stream_options", options);
    }
    if let (Some(notes), Some(Value::Array(messages))) =
        (request.notes.as_deref(), body.get_mut("messages"))
    {
        let after = messages
            .iter()
            .take_while(|m| matches!(m["role"].as_str(), Some("system" | "developer")))
            .count();
        messages.insert(after, json!({"role": "system", "content": notes}));
    }
    with_cache_key(body, request, send_key)
}

/// The Responses body for an `openai_responses` provider: the client's own when it spoke
/// Responses (the notes appended to its `instructions`), else `translated`.
pub fn responses_body<'a>(
    request: &'a ChatRequest,
    translated: impl FnOnce() -> Value,
    base_url: &str,
) -> Outgoing<'a> {
    let send_key = keyed(base_url);
    let Some(mut body) = request
        .passthrough
        .as_deref()
        .and_then(|p| p.outgoing("openai_responses"))
    else {
        return with_cache_key(owned(translated()), request, send_key);
    };
    body.set("model", Value::String(request.model.clone()));
    body.set("stream", Value::Bool(streams(request)));
    if let Some(cap) = request.max_tokens {
        body.clamp_output(cap, "max_output_tokens");
    }
    if let Some(notes) = request.notes.as_deref() {
        let instructions = match body.get("instructions").and_then(Value::as_str) {
            Some(s) if !s.is_empty() => format!("{s}\n\n{notes}"),
            _ => notes.to_owned(),
        };
        body.set("instructions", Value::String(instructions));
    }
    with_cache_key(body, request, send_key)
}

fn owned(translated: Value) -> Outgoing<'static> {
    match translated {
        Value::Object(body) => Outgoing::owned(body),
        _ => Outgoing::default(),
    }
}

/// Whether a provider gets Relay's `prompt_cache_key`: OpenAI's own API has one; compatible
/// servers may refuse a field they do not know.
fn keyed(base_url: &str) -> bool {
    base_url.contains("api.openai.com")
}

fn with_cache_key<'a>(
    mut body: Outgoing<'a>,
    request: &ChatRequest,
    send_key: bool,
) -> Outgoing<'a> {
    if let (true, Some(key)) = (send_key, &request.cache_key)
        && !body.contains("prompt_cache_key")
    {
        body.set("prompt_cache_key", Value::String(key.clone()));
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn relay_marks_tools_system_and_newest_message_when_the_client_marked_none() {
        let client = map(json!({
            "tools": [{"name": "a"}, {"name": "b"}],
            "system": [{"type": "text", "text": "s"}, {"type": "text", "text": "notes"}],
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                {"role": "user", "content": "next"}],
        }));
        let mut body = Outgoing::borrowed(&client);
        add_breakpoints(&mut body, 1);
        let body = body.to_value();
        let body = body.as_object().unwrap();
        assert_eq!(breakpoints(body), 3);
        assert!(body["tools"][1]["cache_control"].is_object());
        assert!(body["system"][0]["cache_control"].is_object());
        assert!(body["system"][1].get("cache_control").is_none());
        assert!(body["messages"][2]["content"][0]["cache_control"].is_object());
    }

    const OPENAI: &str = "https://api.openai.com/v1";

    fn request(door: Door, body: Value, notes: Option<&str>) -> ChatRequest {
        ChatRequest {
            model: "up".into(),
            notes: notes.map(str::to_owned),
            cache_key: Some("relay-k".into()),
            passthrough: Some(std::sync::Arc::new(Passthrough {
                door,
                body: map(body),
                bytes: RawBody::default(),
                anthropic_beta: None,
                raw: true,
            })),
            ..ChatRequest::default()
        }
    }

    #[test]
    fn a_responses_client_reaches_a_responses_provider_whole_with_the_notes_after_its_instructions()
    {
        let client = json!({"model": "auto", "instructions": "Be brief.", "input": [{"type": "message", "role": "user", "content": "hi"}],
            "reasoning": {"effort": "high"}, "prompt_cache_key": "mine", "store": false});
        let r = request(
            Door::Responses,
            client.clone(),
            Some("<project-notes>n</project-notes>"),
        );
        let sent = responses_body(&r, || json!({"translated": true}), OPENAI).to_value();
        assert_eq!(
            sent["instructions"],
            "Be brief.\n\n<project-notes>n</project-notes>"
        );
        assert_eq!(
            (&sent["model"], &sent["stream"]),
            (&json!("up"), &json!(true))
        );
        assert_eq!(
            (&sent["reasoning"], &sent["input"]),
            (&client["reasoning"], &client["input"])
        );
        // The client's own key wins over Relay's.
        assert_eq!(sent["prompt_cache_key"], "mine");
        // Another family's provider gets the translation, with Relay's key where it is sent.
        let sent = chat_body(&r, || json!({"translated": true}), OPENAI).to_value();
        assert_eq!(
            sent,
            json!({"translated": true, "prompt_cache_key": "relay-k"})
        );
        assert_eq!(
            chat_body(&r, || json!({}), "http://127.0.0.1:8080/v1").to_value(),
            json!({})
        );
    }

    #[test]
    fn a_chat_client_keeps_its_messages_with_the_notes_after_its_system_messages() {
        let client = json!({"model": "auto", "messages": [{"role": "system", "content": "s"},
            {"role": "developer", "content": "d"}, {"role": "user", "content": "u"}], "top_p": 0.5});
        let r = request(Door::ChatCompletions, client, Some("notes"));
        let sent = chat_body(&r, || json!(null), OPENAI).to_value();
        let roles: Vec<&str> = sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["s", "d", "notes", "u"]);
        assert_eq!(
            (&sent["top_p"], &sent["stream_options"]),
            (&json!(0.5), &json!({"include_usage": true}))
        );
        assert_eq!(sent["prompt_cache_key"], "relay-k");
    }

    #[test]
    fn signed_thinking_goes_back_and_unsigned_thinking_does_not() {
        let client = json!({"model": "auto", "messages": [{"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "a", "signature": "sig"},
                {"type": "thinking", "thinking": "b", "signature": ""},
                {"type": "redacted_thinking", "data": "enc"}, {"type": "text", "text": "t"}]},
            {"role": "user", "content": "next"}]});
        let r = request(Door::Messages, client, None);
        let sent = messages_body(&r, || json!(null)).to_value();
        let kinds: Vec<&str> = sent["messages"][1]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["thinking", "redacted_thinking", "text"]);
        assert_eq!(sent["messages"][1]["content"][0]["signature"], "sig");
    }

    #[test]
    fn the_fields_relay_leaves_alone_are_sent_as_the_clients_bytes_and_the_rest_as_relays() {
        let sent = br#"{"model": "auto", "stream": true,
            "messages": [ {"role":"user", "content": "caf\u00e9 \u2192 1.0e0"} ],
            "temperature": 1.0, "metadata": {"user_id": "client"}}"#;
        let body: Map<String, Value> = serde_json::from_slice(sent).unwrap();
        let mut bytes = RawBody::of(bytes::Bytes::from_static(sent));
        bytes.forget("metadata");
        let mut body = body;
        body.insert("metadata".into(), json!({"user_id": "relay"}));
        let p = Passthrough {
            door: Door::Messages,
            body,
            bytes,
            anthropic_beta: None,
            raw: false,
        };
        let mut out = p.outgoing("anthropic").unwrap();
        out.set("model", json!("up"));
        let text = String::from_utf8(out.to_vec().unwrap()).unwrap();
        // The client's spelling of its messages and numbers survives, escapes included.
        assert!(
            text.contains(r#""messages":[ {"role":"user", "content": "caf\u00e9 \u2192 1.0e0"} ]"#),
            "{text}"
        );
        assert!(text.contains(r#""temperature":1.0"#), "{text}");
        // What Relay set or changed is its own.
        assert!(text.contains(r#""model":"up""#), "{text}");
        assert!(text.contains(r#""metadata":{"user_id":"relay"}"#), "{text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["messages"][0]["content"], "caf\u{e9} \u{2192} 1.0e0");
        assert!(p.outgoing("openai").is_none());
    }

    #[test]
    fn a_client_that_marks_its_own_prefix_keeps_it_as_it_is() {
        let client = map(json!({
            "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": [{"role": "user", "content": "hi"}],
        }));
        let mut body = Outgoing::borrowed(&client);
        add_breakpoints(&mut body, 1);
        assert_eq!(body.to_value(), Value::Object(client.clone()));
        // Nothing of the client's was copied: every field is still borrowed.
        assert_eq!(body.copied(), 0);
    }
}
