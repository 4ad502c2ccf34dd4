//! Reasoning items in a Responses answer: the provider's own (an `openai_responses` provider's,
//! under its id, closed with its summary parts and `encrypted_content`) or one made of another
//! provider's reasoning text, streamed as summary part and summary text events.

use axum::body::Bytes;
use relay_wire::agent::ReasoningItem;
use serde_json::{Value, json};

use super::{Open, Writer, item_id};

impl Writer {
    /// Ends the summary part being streamed, if one was opened.
    pub(super) fn close_part(
        &mut self,
        out: &mut Vec<Bytes>,
        id: &str,
        index: usize,
        text: &str,
        part: bool,
    ) {
        if !part {
            return;
        }
        let at = json!({"item_id": id, "output_index": index, "summary_index": 0});
        let mut done = at.clone();
        done["text"] = json!(text);
        self.emit(out, "response.reasoning_summary_text.done", done);
        let mut part_done = at;
        part_done["part"] = json!({"type": "summary_text", "text": text});
        self.emit(out, "response.reasoning_summary_part.done", part_done);
    }

    /// Opens a reasoning item under `id` (the provider's, or a new one).
    pub(super) fn open_reasoning(&mut self, out: &mut Vec<Bytes>, id: String) {
        self.close(out);
        let index = self.output.len();
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": {"id": id, "type": "reasoning", "summary": []}}),
        );
        self.open = Open::Reasoning {
            id,
            index,
            text: String::new(),
            part: false,
        };
    }

    /// A Responses provider's reasoning item: its opening starts the output item under the
    /// provider's id; its closing ends it exactly as the provider sent it (id, summary parts,
    /// `encrypted_content`, content), so the client can send it back in its next turn.
    pub(super) fn reasoning_item(&mut self, out: &mut Vec<Bytes>, item: ReasoningItem) {
        let Some(summary) = item.summary else {
            self.open_reasoning(out, item.id);
            return;
        };
        if !matches!(&self.open, Open::Reasoning { id, .. } if *id == item.id) {
            self.open_reasoning(out, item.id.clone());
        }
        let Open::Reasoning {
            id,
            index,
            text,
            part,
        } = std::mem::replace(&mut self.open, Open::None)
        else {
            return;
        };
        self.close_part(out, &id, index, &text, part);
        let summary: Vec<Value> = summary
            .iter()
            .map(|text| json!({"type": "summary_text", "text": text}))
            .collect();
        let mut done = json!({"id": id, "type": "reasoning", "summary": summary});
        if let Some(encrypted) = item.encrypted_content {
            done["encrypted_content"] = json!(encrypted);
        }
        if let Some(content) = item.content {
            done["content"] = content
                .iter()
                .map(|text| json!({"type": "reasoning_text", "text": text}))
                .collect();
        }
        self.finish_item(out, index, done);
    }

    pub(super) fn reasoning(&mut self, out: &mut Vec<Bytes>, piece: String) {
        if !matches!(self.open, Open::Reasoning { .. }) {
            self.open_reasoning(out, item_id("rs"));
        }
        if let Open::Reasoning {
            id,
            index,
            part: part @ false,
            ..
        } = &mut self.open
        {
            *part = true;
            let data = json!({"item_id": id, "output_index": index, "summary_index": 0,
                "part": {"type": "summary_text", "text": ""}});
            self.emit(out, "response.reasoning_summary_part.added", data);
        }
        if let Open::Reasoning {
            id, index, text, ..
        } = &mut self.open
        {
            text.push_str(&piece);
            let data =
                json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": piece});
            self.emit(out, "response.reasoning_summary_text.delta", data);
        }
    }
}
