//! The Messages answer: a leg's events as Anthropic's stream (`message_start`, content blocks
//! with thinking closed by its `signature_delta`, `message_delta`, `message_stop`, `ping`) or,
//! gathered, as one `message`.

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use relay_wire::agent::{AgentEvent, FinishReason, ToolCall, Usage};
use serde_json::{Value, json};

use super::{MessageOut, MessageUsage};
use crate::error::ApiError;
use crate::http::compat::door::{Answer, Collected, Ending};
use crate::http::compat::{Api, errors};

fn stop_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ContentFilter => "refusal",
    }
}

fn tool_use(c: &ToolCall) -> Value {
    let input: Value = serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input})
}

/// Encodes one answer's events as Messages stream events or as one message.
pub struct Writer {
    id: String,
    model: String,
    /// Content blocks started so far (the next block's index).
    blocks: usize,
    /// The block being streamed: `text` or `thinking`.
    open: Option<&'static str>,
    /// The parts of a non-streamed answer.
    collected: Collected,
}

impl Writer {
    /// The encoder of an answer from `model`.
    pub fn new(model: String) -> Self {
        Self {
            id: format!("msg_{}", hex::encode(rand::random::<[u8; 12]>())),
            model,
            blocks: 0,
            open: None,
            collected: Collected::default(),
        }
    }

    fn close(&mut self, out: &mut Vec<Bytes>) {
        if self.open.take().is_some() {
            out.push(event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": self.blocks - 1}),
            ));
        }
    }

    /// Opens a block of `kind` unless one is open already.
    fn open(&mut self, out: &mut Vec<Bytes>, kind: &'static str, start: Value) {
        if self.open == Some(kind) {
            return;
        }
        self.close(out);
        self.open = Some(kind);
        self.blocks += 1;
        out.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": self.blocks - 1, "content_block": start}),
        ));
    }

    fn delta(&self, delta: Value) -> Bytes {
        event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": self.blocks - 1, "delta": delta}),
        )
    }

    /// Thinking as Anthropic streams it: text deltas, then the signature that closes the block;
    /// an encrypted block whole.
    fn reasoning(
        &mut self,
        out: &mut Vec<Bytes>,
        text: String,
        signature: Option<String>,
        redacted: Option<String>,
    ) {
        if let Some(data) = redacted {
            self.open(
                out,
                "redacted_thinking",
                json!({"type": "redacted_thinking", "data": data}),
            );
            self.close(out);
            return;
        }
        if !text.is_empty() {
            self.open(
                out,
                "thinking",
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            );
            out.push(self.delta(json!({"type": "thinking_delta", "thinking": text})));
        }
        if let Some(signature) = signature {
            self.open(
                out,
                "thinking",
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            );
            out.push(self.delta(json!({"type": "signature_delta", "signature": signature})));
            self.close(out);
        }
    }

    fn finish(&mut self, out: &mut Vec<Bytes>, reason: &str, usage: &Usage) {
        self.close(out);
        out.push(event(
            "message_delta",
            &json!({"type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": null},
                "usage": MessageUsage::of(usage)}),
        ));
        out.push(event("message_stop", &json!({"type": "message_stop"})));
    }
}

impl Answer for Writer {
    fn event(&mut self, e: AgentEvent) -> Vec<Bytes> {
        let mut out = Vec::new();
        match e {
            AgentEvent::Start { .. } => out.push(event(
                "message_start",
                &json!({"type": "message_start", "message": {
                    "id": self.id, "type": "message", "role": "assistant", "model": self.model,
                    "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": 0, "output_tokens": 0}}}),
            )),
            AgentEvent::Text { text } => {
                self.open(&mut out, "text", json!({"type": "text", "text": ""}));
                out.push(self.delta(json!({"type": "text_delta", "text": text})));
            }
            // A Responses reasoning `item` is OpenAI's: never an Anthropic signature.
            AgentEvent::Reasoning {
                text,
                signature,
                redacted,
                ..
            } => self.reasoning(&mut out, text, signature, redacted),
            AgentEvent::Ping => out.push(event("ping", &json!({"type": "ping"}))),
            AgentEvent::Done {
                finish_reason,
                usage,
            } => self.finish(&mut out, stop_reason(finish_reason), &usage),
            AgentEvent::ToolCalls { calls, usage } => {
                self.close(&mut out);
                for c in &calls {
                    let index = self.blocks;
                    self.blocks += 1;
                    out.push(event(
                        "content_block_start",
                        &json!({"type": "content_block_start", "index": index,
                            "content_block": {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}}),
                    ));
                    out.push(event(
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": c.arguments}}),
                    ));
                    out.push(event(
                        "content_block_stop",
                        &json!({"type": "content_block_stop", "index": index}),
                    ));
                }
                self.finish(&mut out, "tool_use", &usage);
            }
            AgentEvent::Error { error, message, .. } => out.push(event(
                "error",
                &errors::body(Api::Anthropic, error, &message),
            )),
        }
        out
    }

    fn collect(&mut self, event: AgentEvent) {
        self.collected.add(event);
    }

    /// The non-streamed answer; a failure after the first output is an error answer.
    fn whole(self) -> Result<Response, ApiError> {
        let whole = self.collected.whole()?;
        let mut content = whole.thinking;
        if !whole.text.is_empty() {
            content.push(json!({"type": "text", "text": whole.text}));
        }
        let reason = match whole.ending {
            Ending::Finished(reason) => stop_reason(reason),
            Ending::ToolCalls(calls) => {
                content.extend(calls.iter().map(tool_use));
                "tool_use"
            }
        };
        Ok(axum::Json(MessageOut {
            id: self.id,
            kind: "message",
            role: "assistant",
            model: self.model,
            content,
            stop_reason: reason,
            stop_sequence: None,
            usage: MessageUsage::of(&whole.usage),
        })
        .into_response())
    }
}

/// `event: name\ndata: {json}\n\n`.
fn event(name: &str, value: &Value) -> Bytes {
    let mut out = format!("event: {name}\ndata: ").into_bytes();
    out.extend(serde_json::to_vec(value).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}
