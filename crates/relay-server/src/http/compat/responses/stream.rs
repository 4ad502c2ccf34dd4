//! A leg's events as a Responses answer: the SSE events (`response.created`,
//! `response.in_progress`, per output item `response.output_item.added` / `.done` with its
//! content events, then exactly one of `response.completed`, `response.incomplete`,
//! `response.failed`), each with a rising `sequence_number`; or, not streamed, the final
//! `response` object built from the same events.

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use relay_wire::agent::{AgentEvent, FinishReason, ToolCall, Usage};
use serde_json::{Value, json};

use super::tools::{self, Names, Origin};
use crate::error::ApiError;
use crate::http::compat::door::Answer;

mod reasoning;

/// The item being streamed: its kind, id, index in `output` and its text so far.
enum Open {
    None,
    /// A reasoning item: the provider's own (opened by its item, with its id) or one made of
    /// reasoning text; `part` when a summary part was opened.
    Reasoning {
        id: String,
        index: usize,
        text: String,
        part: bool,
    },
    Message {
        id: String,
        index: usize,
        text: String,
    },
}

/// Encodes one answer.
pub struct Writer {
    id: String,
    created_at: i64,
    model: String,
    names: Names,
    /// What the response object echoes of the request.
    echo: Value,
    sequence: u64,
    output: Vec<Value>,
    open: Open,
    /// The final response object once a terminal event came; failures keep their error.
    terminal: Option<Result<Value, ApiError>>,
}

fn item_id(prefix: &str) -> String {
    format!("{prefix}_{}", hex::encode(rand::random::<[u8; 16]>()))
}

fn usage_of(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_input_tokens.unwrap_or(0)},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens.unwrap_or(0)},
        "total_tokens": u.input_tokens + u.output_tokens,
    })
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

impl Writer {
    /// `echo` holds the request fields the response repeats (`instructions`, `tools`...).
    pub fn new(model: String, names: Names, echo: Value) -> Self {
        Self {
            id: item_id("resp"),
            created_at: crate::http::compat::now_secs(),
            model,
            names,
            echo,
            sequence: 0,
            output: Vec::new(),
            open: Open::None,
            terminal: None,
        }
    }

    /// The response object with `status` and the output so far.
    fn response(&self, status: &str, usage: Option<&Usage>) -> Value {
        let mut r = json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": null,
            "incomplete_details": null,
            "model": self.model,
            "output": self.output,
            "parallel_tool_calls": true,
            "usage": usage.map(usage_of),
        });
        if let (Some(r), Some(echo)) = (r.as_object_mut(), self.echo.as_object()) {
            for (k, v) in echo {
                r.insert(k.clone(), v.clone());
            }
        }
        r
    }

    /// One SSE event: `event: {type}` and the data with the next sequence number.
    fn emit(&mut self, out: &mut Vec<Bytes>, kind: &str, mut data: Value) {
        data["type"] = Value::String(kind.to_owned());
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        let mut chunk = format!("event: {kind}\ndata: ").into_bytes();
        chunk.extend(serde_json::to_vec(&data).unwrap_or_default());
        chunk.extend_from_slice(b"\n\n");
        out.push(Bytes::from(chunk));
    }

    /// Closes the item being streamed, adding it to `output`.
    fn close(&mut self, out: &mut Vec<Bytes>) {
        match std::mem::replace(&mut self.open, Open::None) {
            Open::None => {}
            Open::Reasoning {
                id,
                index,
                text,
                part,
            } => {
                self.close_part(out, &id, index, &text, part);
                let summary: Vec<Value> = (part || !text.is_empty())
                    .then(|| json!({"type": "summary_text", "text": text}))
                    .into_iter()
                    .collect();
                let item = json!({"id": id, "type": "reasoning", "summary": summary});
                self.finish_item(out, index, item);
            }
            Open::Message { id, index, text } => {
                let at = json!({"item_id": id, "output_index": index, "content_index": 0});
                let mut done = at.clone();
                done["text"] = json!(text);
                done["logprobs"] = json!([]);
                self.emit(out, "response.output_text.done", done);
                let mut part_done = at;
                part_done["part"] = text_part(&text);
                self.emit(out, "response.content_part.done", part_done);
                let item = json!({"id": id, "type": "message", "status": "completed",
                    "role": "assistant", "content": [text_part(&text)]});
                self.finish_item(out, index, item);
            }
        }
    }

    fn finish_item(&mut self, out: &mut Vec<Bytes>, index: usize, item: Value) {
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self.output.push(item);
    }

    fn text(&mut self, out: &mut Vec<Bytes>, piece: String) {
        if !matches!(self.open, Open::Message { .. }) {
            self.close(out);
            let (id, index) = (item_id("msg"), self.output.len());
            self.emit(out, "response.output_item.added", json!({"output_index": index,
                "item": {"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}));
            self.emit(
                out,
                "response.content_part.added",
                json!({"item_id": id,
                "output_index": index, "content_index": 0, "part": text_part("")}),
            );
            self.open = Open::Message {
                id,
                index,
                text: String::new(),
            };
        }
        if let Open::Message { id, index, text } = &mut self.open {
            text.push_str(&piece);
            let data = json!({"item_id": id, "output_index": index, "content_index": 0,
                "delta": piece, "logprobs": []});
            self.emit(out, "response.output_text.delta", data);
        }
    }

    /// One call as a `function_call` (namespaced ones with their `namespace`) or, for a custom
    /// tool, a `custom_tool_call` item, streamed whole.
    fn call(&mut self, out: &mut Vec<Bytes>, call: ToolCall) {
        let index = self.output.len();
        let origin = self.names.origin(&call.name);
        let (kind, done_field, delta_event, done_event, payload, mut item) = match origin {
            Origin::Custom | Origin::Namespaced { custom: true, .. } => {
                let input = tools::custom_input(&call.arguments);
                let mut item = json!({"id": item_id("ctc"), "type": "custom_tool_call",
                        "status": "completed", "call_id": call.id, "name": call.name, "input": ""});
                if let Origin::Namespaced {
                    namespace, name, ..
                } = origin
                {
                    item["name"] = json!(name);
                    item["namespace"] = json!(namespace);
                }
                (
                    "input",
                    "input",
                    "response.custom_tool_call_input.delta",
                    "response.custom_tool_call_input.done",
                    input,
                    item,
                )
            }
            origin => {
                let mut item = json!({"id": item_id("fc"), "type": "function_call",
                        "status": "completed", "call_id": call.id, "name": call.name, "arguments": ""});
                if let Origin::Namespaced {
                    namespace, name, ..
                } = origin
                {
                    item["name"] = json!(name);
                    item["namespace"] = json!(namespace);
                }
                (
                    "arguments",
                    "arguments",
                    "response.function_call_arguments.delta",
                    "response.function_call_arguments.done",
                    call.arguments,
                    item,
                )
            }
        };
        let id = item["id"].clone();
        let mut added = item.clone();
        added["status"] = json!("in_progress");
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        );
        self.emit(
            out,
            delta_event,
            json!({"item_id": id, "output_index": index, "delta": payload}),
        );
        let mut done = json!({"item_id": id, "output_index": index});
        done[done_field] = json!(payload);
        if kind == "arguments" {
            done["name"] = item["name"].clone();
        }
        self.emit(out, done_event, done);
        item[kind] = json!(payload);
        self.finish_item(out, index, item);
    }

    fn end_with(
        &mut self,
        out: &mut Vec<Bytes>,
        status: &str,
        usage: &Usage,
        reason: Option<&str>,
    ) {
        self.close(out);
        let mut response = self.response(status, Some(usage));
        if let Some(reason) = reason {
            response["incomplete_details"] = json!({"reason": reason});
        }
        let kind = format!("response.{status}");
        self.emit(out, &kind, json!({"response": response}));
        self.terminal = Some(Ok(response));
    }

    fn fail(&mut self, out: &mut Vec<Bytes>, error: ApiError) {
        self.close(out);
        let mut response = self.response("failed", None);
        response["error"] = json!({"code": error.code.as_str(), "message": error.message});
        self.emit(out, "response.failed", json!({"response": response}));
        self.terminal = Some(Err(error));
    }
}

impl Answer for Writer {
    fn event(&mut self, event: AgentEvent) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.terminal.is_some() {
            return out; // exactly one terminal event
        }
        match event {
            AgentEvent::Start { .. } => {
                let response = self.response("in_progress", None);
                self.emit(&mut out, "response.created", json!({"response": response}));
                self.emit(
                    &mut out,
                    "response.in_progress",
                    json!({"response": response}),
                );
            }
            AgentEvent::Text { text } => self.text(&mut out, text),
            AgentEvent::Reasoning { text, .. } if !text.is_empty() => {
                self.reasoning(&mut out, text)
            }
            AgentEvent::Reasoning {
                item: Some(item), ..
            } => self.reasoning_item(&mut out, item),
            // Anthropic's signatures and redacted blocks have no place in a Responses answer.
            AgentEvent::Reasoning { .. } => {}
            AgentEvent::Ping => out.push(Bytes::from_static(b": ping\n\n")),
            AgentEvent::ToolCalls { calls, usage } => {
                self.close(&mut out);
                for call in calls {
                    self.call(&mut out, call);
                }
                self.end_with(&mut out, "completed", &usage, None);
            }
            AgentEvent::Done {
                finish_reason,
                usage,
            } => match finish_reason {
                FinishReason::Stop => self.end_with(&mut out, "completed", &usage, None),
                FinishReason::Length => {
                    self.end_with(&mut out, "incomplete", &usage, Some("max_output_tokens"));
                }
                FinishReason::ContentFilter => {
                    self.end_with(&mut out, "incomplete", &usage, Some("content_filter"));
                }
            },
            AgentEvent::Error { error, message, .. } => {
                self.fail(&mut out, ApiError::new(error, message));
            }
        }
        out
    }

    fn whole(self) -> Result<Response, ApiError> {
        match self.terminal {
            Some(Ok(response)) => Ok(axum::Json(response).into_response()),
            Some(Err(e)) => Err(e),
            None => Err(ApiError::internal("a leg ended on a non-terminal event")),
        }
    }
}
