//! A same-family client's non-streamed call (issue 39, point 4): the provider is asked for its
//! whole answer, and that answer reaches the client as the provider sent it
//! (`ProviderEvent::Raw`, one JSON document), while Relay reads what it needs from it (usage for
//! the ledger and budgets, the stop reason, the tool calls) through the adapter's own stream
//! normaliser, fed the answer as the events its stream would have carried. One reader of each
//! wire format, then, whether the provider streamed or not.

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde_json::{Value, json};

use super::sse::EventNormaliser;
use super::transport::endpoint::{Endpoint, Upstream};
use super::{ChatRequest, EventStream, ProviderError, ProviderEvent};

/// The most bytes of a whole answer read: a long answer with its tool calls is far below it;
/// a provider that sends more is cut off instead of filling the memory.
pub const WHOLE_ANSWER_MAX: usize = 32 * 1024 * 1024;

/// Whether a provider of `kind` is asked for its whole answer: the client speaks its family and
/// did not ask for a stream.
pub fn whole_for(request: &ChatRequest, kind: &str) -> bool {
    request
        .passthrough
        .as_deref()
        .is_some_and(|p| !p.raw && p.for_kind(kind).is_some())
}

/// The header a whole answer is asked for with: JSON, not events.
const ACCEPT_JSON: (&str, &str) = ("accept", "application/json");

/// The synthetic stream events (name, data) that carry a whole answer of one wire format.
pub type Replay = fn(&Value) -> Vec<(&'static str, Value)>;

/// Sends `body` to `url` (with the adapter's `extra` headers) asking for the whole answer, and
/// reads it (`answer`).
pub async fn fetch<N: EventNormaliser>(
    endpoint: &Endpoint,
    url: reqwest::Url,
    body: Vec<u8>,
    extra: &[(&'static str, &str)],
    normaliser: N,
    replay: Replay,
) -> Result<EventStream, ProviderError> {
    let mut headers = extra.to_vec();
    headers.push(ACCEPT_JSON);
    let upstream = endpoint.post_sse(url, body, &headers).await?;
    answer(upstream, normaliser, replay).await
}

/// Reads the whole answer (within `WHOLE_ANSWER_MAX`) and yields it as `Raw`, then the events
/// `normaliser` makes of it, ending with its finish. An answer that is no JSON, or that the
/// normaliser refuses (an error in a 200), fails as a stream would, before any output. A server
/// that streams although it was asked not to is read as a stream (and the answer is then
/// Relay's encoding of it): its first bytes tell, as an event stream never opens with `{`.
pub async fn answer<N: EventNormaliser>(
    upstream: Upstream,
    mut normaliser: N,
    replay: Replay,
) -> Result<EventStream, ProviderError> {
    let mut body = upstream.body;
    let mut bytes = BytesMut::new();
    let mut first = None;
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        if let Some(&b) = chunk.iter().find(|b| !b.is_ascii_whitespace()) {
            first = Some(b);
            bytes.extend_from_slice(&chunk);
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    if first.is_some_and(|b| b != b'{') {
        let opened = futures::stream::once(async move { Ok(bytes.freeze()) });
        return Ok(super::transport::endpoint::stream_response(
            Upstream {
                body: Box::pin(opened.chain(body)),
                max_event_bytes: upstream.max_event_bytes,
            },
            normaliser,
        ));
    }
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        if bytes.len().saturating_add(chunk.len()) > WHOLE_ANSWER_MAX {
            return Err(ProviderError::EventTooLarge {
                max: WHOLE_ANSWER_MAX,
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    let bytes: Bytes = bytes.freeze();
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|_| ProviderError::Protocol("the provider's answer is not JSON".into()))?;
    let mut events = vec![Ok(ProviderEvent::Raw(bytes))];
    for (name, data) in replay(&value) {
        events.extend(normaliser.feed(name, &data_of(data))?.into_iter().map(Ok));
    }
    events.push(normaliser.finish());
    Ok(Box::pin(futures::stream::iter(events)))
}

/// An event's data as a stream carries it: a string (`[DONE]`) as it is, JSON serialised.
fn data_of(data: Value) -> String {
    match data {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// An Anthropic `message`: its start (with the usage), each content block whole (a thinking
/// block's signature as the delta that closes it), the stop reason.
pub fn messages(message: &Value) -> Vec<(&'static str, Value)> {
    if message["type"] == "error" {
        return vec![("error", message.clone())];
    }
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"usage": message["usage"]}}),
    )];
    for (index, block) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        if let Some(signature) = block["signature"].as_str().filter(|s| !s.is_empty()) {
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "signature_delta", "signature": signature}}),
            ));
        }
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"]}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
}

/// A `chat.completion`: one chunk whose delta is the first choice's message, with its tool
/// calls numbered as a stream numbers them, the finish reason and the usage.
pub fn chat(completion: &Value) -> Vec<(&'static str, Value)> {
    if completion.get("error").is_some() {
        return vec![("message", completion.clone())];
    }
    let choice = &completion["choices"][0];
    let mut delta = choice["message"].clone();
    if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for (index, call) in calls.iter_mut().enumerate() {
            if let Some(call) = call.as_object_mut() {
                call.insert("index".into(), json!(index));
            }
        }
    }
    let mut chunk = json!({"choices": [{"index": 0, "delta": delta,
        "finish_reason": choice["finish_reason"]}]});
    if let Some(usage) = completion.get("usage").filter(|u| u.is_object()) {
        chunk["usage"] = usage.clone();
    }
    vec![
        ("message", chunk),
        ("message", Value::String("[DONE]".into())),
    ]
}

/// A Responses `response`: each output item done (a message's text as its delta), then its
/// terminal event by `status`.
pub fn responses(response: &Value) -> Vec<(&'static str, Value)> {
    let mut events = Vec::new();
    for (index, item) in response["output"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if item["type"] == "message" {
            for part in item["content"].as_array().into_iter().flatten() {
                if let Some(text) = part["text"].as_str().or(part["refusal"].as_str()) {
                    events.push((
                        "response.output_text.delta",
                        json!({"type": "response.output_text.delta", "delta": text}),
                    ));
                }
            }
        } else {
            events.push((
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            ));
        }
    }
    let terminal = match response["status"].as_str() {
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        _ => "response.completed",
    };
    events.push((terminal, json!({"type": terminal, "response": response})));
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{FinishReason, anthropic, openai, openai_responses};

    /// The events `replay` makes of `answer`, through `normaliser`.
    fn replayed<N: EventNormaliser>(
        mut normaliser: N,
        replay: Replay,
        answer: Value,
    ) -> Vec<ProviderEvent> {
        let mut out = Vec::new();
        for (name, data) in replay(&answer) {
            out.extend(normaliser.feed(name, &data_of(data)).unwrap());
        }
        out.push(normaliser.finish().unwrap());
        out
    }

    fn finished(
        events: &[ProviderEvent],
    ) -> (
        &FinishReason,
        &[crate::providers::ToolCall],
        &crate::providers::Usage,
    ) {
        match events.last() {
            Some(ProviderEvent::Finished {
                finish_reason,
                tool_calls,
                usage,
            }) => (finish_reason, tool_calls, usage),
            other => panic!("no finish: {other:?}"),
        }
    }

    #[test]
    fn a_whole_message_gives_its_text_thinking_calls_and_usage() {
        let events = replayed(
            anthropic::Normaliser::new(),
            messages,
            json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.rs"}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 7}}),
        );
        assert!(events.contains(&ProviderEvent::Text("Reading it.".into())));
        assert!(events.contains(&ProviderEvent::ReasoningSignature("sig".into())));
        let (reason, calls, usage) = finished(&events);
        assert_eq!(*reason, FinishReason::ToolCalls);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].arguments.as_str()),
            ("toolu_1", r#"{"path":"a.rs"}"#)
        );
        assert_eq!(
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_input_tokens
            ),
            (100, 7, Some(90))
        );
    }

    #[test]
    fn a_whole_chat_completion_gives_its_calls_and_usage() {
        let events = replayed(
            openai::Normaliser::new(),
            chat,
            json!({
            "id": "chatcmpl-1", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "ok",
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"p\":1}"}}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}),
        );
        assert!(events.contains(&ProviderEvent::Text("ok".into())));
        let (reason, calls, usage) = finished(&events);
        assert_eq!(*reason, FinishReason::ToolCalls);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_1", "read")
        );
        assert_eq!((usage.input_tokens, usage.output_tokens), (12, 3));
    }

    #[test]
    fn a_whole_response_gives_its_text_calls_and_usage_and_an_incomplete_one_its_reason() {
        let response = json!({"id": "resp_1", "object": "response", "status": "completed",
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "shell", "arguments": "{}"}],
            "usage": {"input_tokens": 20, "output_tokens": 4, "input_tokens_details": {"cached_tokens": 8}}});
        let events = replayed(
            openai_responses::Normaliser::default(),
            responses,
            response.clone(),
        );
        assert!(events.contains(&ProviderEvent::Text("hi".into())));
        // As from a stream: the calls make the turn a tool turn, whatever the status says.
        let (_, calls, usage) = finished(&events);
        assert_eq!(calls[0].id, "call_9");
        assert_eq!((usage.input_tokens, usage.output_tokens), (20, 4));
        let mut cut = response;
        cut["status"] = json!("incomplete");
        cut["incomplete_details"] = json!({"reason": "max_output_tokens"});
        cut["output"] = json!([]);
        let events = replayed(openai_responses::Normaliser::default(), responses, cut);
        assert_eq!(*finished(&events).0, FinishReason::Length);
    }

    #[test]
    fn an_error_in_a_whole_answer_fails_as_in_a_stream() {
        let mut normaliser = anthropic::Normaliser::new();
        let error =
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}});
        let (name, data) = messages(&error).remove(0);
        assert!(normaliser.feed(name, &data.to_string()).is_err());
    }
}
