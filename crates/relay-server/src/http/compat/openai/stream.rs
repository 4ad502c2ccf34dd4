//! The Chat Completions answer: a leg's events as `chat.completion.chunk`s (tool calls by index,
//! the usage chunk when asked for, `data: [DONE]`) or, gathered, as one `chat.completion`.

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use relay_wire::agent::{AgentEvent, FinishReason, NestedToolCall, ToolCall, Usage};
use serde_json::{Value, json};

use super::{AssistantMessage, ChatCompletion, Choice, CompletionUsage};
use crate::error::ApiError;
use crate::http::compat::door::{Answer, Collected, Ending};
use crate::http::compat::{Api, errors};

fn finish_name(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
    }
}

fn usage_of(u: &Usage) -> CompletionUsage {
    CompletionUsage {
        prompt_tokens: u.input_tokens,
        completion_tokens: u.output_tokens,
        total_tokens: u.input_tokens + u.output_tokens,
        prompt_tokens_details: u.cached_input_tokens.map(|n| json!({"cached_tokens": n})),
        completion_tokens_details: u.reasoning_tokens.map(|n| json!({"reasoning_tokens": n})),
    }
}

fn nested(c: &ToolCall) -> NestedToolCall {
    NestedToolCall {
        id: c.id.clone(),
        kind: Some("function".into()),
        function: relay_wire::agent::NestedFunction {
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        },
    }
}

/// Encodes one answer's events as Chat Completions chunks or as one completion.
pub struct Writer {
    id: String,
    created: i64,
    model: String,
    include_usage: bool,
    /// The parts of a non-streamed answer.
    collected: Collected,
}

impl Writer {
    /// The encoder of an answer from `model`; `include_usage` adds the usage chunk to a stream.
    pub fn new(model: String, include_usage: bool) -> Self {
        Self {
            id: format!("chatcmpl-{}", hex::encode(rand::random::<[u8; 12]>())),
            created: crate::http::compat::now_secs(),
            model,
            include_usage,
            collected: Collected::default(),
        }
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        data(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": null}],
        }))
    }

    /// The end of a stream: the finish chunk, the usage chunk when asked for, `[DONE]`.
    fn finish(&self, finish_reason: &str, usage: &Usage) -> Vec<Bytes> {
        let mut out = vec![self.chunk(json!({}), Some(finish_reason))];
        if self.include_usage {
            out.push(data(&json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": usage_of(usage),
            })));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        out
    }
}

impl Answer for Writer {
    fn event(&mut self, event: AgentEvent) -> Vec<Bytes> {
        match event {
            AgentEvent::Start { .. } => {
                vec![self.chunk(json!({"role": "assistant", "content": ""}), None)]
            }
            AgentEvent::Text { text } => vec![self.chunk(json!({"content": text}), None)],
            // Where compatible servers put visible reasoning; OpenAI's SDK keeps unknown fields.
            AgentEvent::Reasoning { text, .. } if !text.is_empty() => {
                vec![self.chunk(json!({"reasoning_content": text}), None)]
            }
            // A thinking block's signature or encrypted form is Anthropic's alone.
            AgentEvent::Reasoning { .. } => Vec::new(),
            AgentEvent::Ping => vec![Bytes::from_static(b": ping\n\n")],
            AgentEvent::Done {
                finish_reason,
                usage,
            } => self.finish(finish_name(finish_reason), &usage),
            AgentEvent::ToolCalls { calls, usage } => {
                // The first delta of each call carries its id and name, the next its arguments,
                // as OpenAI streams them; parallel calls keep their indices.
                let mut out = Vec::with_capacity(calls.len() * 2 + 3);
                for (index, c) in calls.iter().enumerate() {
                    out.push(self.chunk(
                        json!({"tool_calls": [{"index": index, "id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": ""}}]}),
                        None,
                    ));
                    out.push(self.chunk(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": c.arguments}}]}),
                        None,
                    ));
                }
                out.extend(self.finish("tool_calls", &usage));
                out
            }
            AgentEvent::Error { error, message, .. } => {
                vec![data(&errors::body(Api::OpenAi, error, &message))]
            }
        }
    }

    fn collect(&mut self, event: AgentEvent) {
        self.collected.add(event);
    }

    /// The non-streamed answer; a failure after the first output is an error answer.
    fn whole(self) -> Result<Response, ApiError> {
        let whole = self.collected.whole()?;
        let (finish_reason, tool_calls) = match &whole.ending {
            Ending::Finished(reason) => (finish_name(*reason), Vec::new()),
            Ending::ToolCalls(calls) => ("tool_calls", calls.iter().map(nested).collect()),
        };
        let content = (!whole.text.is_empty() || tool_calls.is_empty()).then_some(whole.text);
        Ok(axum::Json(ChatCompletion {
            id: self.id,
            object: "chat.completion",
            created: self.created,
            model: self.model,
            choices: vec![Choice {
                index: 0,
                message: AssistantMessage {
                    role: "assistant",
                    content,
                    tool_calls,
                },
                finish_reason,
                logprobs: None,
            }],
            usage: usage_of(&whole.usage),
        })
        .into_response())
    }
}

/// `data: {json}\n\n`.
fn data(value: &Value) -> Bytes {
    let mut out = b"data: ".to_vec();
    out.extend(serde_json::to_vec(value).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}
