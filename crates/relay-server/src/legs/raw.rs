//! A same-family provider's own events (or its whole non-streamed answer, one JSON document) on
//! their way to the client (issue 39, point 4): sent
//! byte for byte, except that a tool call they open keeps the rules of `calls` — an id that is
//! empty or that the conversation's history already used, or a name outside the rule, is fixed
//! (and the event re-encoded) as `calls::normalise` fixes it for Relay's own events.
//!
//! The frames that can open a call: Anthropic's `content_block_start` of a `tool_use` block
//! (`id`, `name`), a Chat Completions delta's `tool_calls[]` entry that carries an `id`, and a
//! Responses `function_call` item (`call_id`, `name`), which the Responses stream repeats in later
//! events; an id seen once in the answer is mapped the same way wherever it appears again.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use serde_json::{Map, Value};

use super::calls;

/// The ids one answer's events introduced, as the client was sent them.
#[derive(Debug, Default)]
pub struct AnswerIds {
    sent: HashMap<String, String>,
}

impl AnswerIds {
    /// `bytes` (one SSE event) as the client gets it; `taken` holds the history's call ids.
    pub fn frame(&mut self, bytes: Bytes, taken: &HashSet<String>) -> Bytes {
        // Most events carry no call: a byte search spares them a parse.
        let has_call = [&b"tool_use"[..], b"function_call", b"tool_calls"]
            .iter()
            .any(|needle| bytes.windows(needle.len()).any(|w| w == *needle));
        if !has_call {
            return bytes;
        }
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return bytes;
        };
        if text.trim_start().starts_with('{') {
            return self.whole(text, taken).unwrap_or(bytes);
        }
        let mut name = None;
        let mut data = String::new();
        for line in text.lines() {
            if let Some(value) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value.strip_prefix(' ').unwrap_or(value));
            } else if let Some(value) = line.strip_prefix("event:") {
                name = Some(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        let Ok(mut value) = serde_json::from_str::<Value>(&data) else {
            return bytes;
        };
        if !self.fix(&mut value, taken) {
            return bytes;
        }
        let mut out = String::with_capacity(bytes.len() + 16);
        if let Some(name) = name {
            out.push_str("event: ");
            out.push_str(name);
            out.push('\n');
        }
        out.push_str("data: ");
        out.push_str(&value.to_string());
        out.push_str("\n\n");
        Bytes::from(out)
    }

    /// A whole (non-streamed) answer, re-encoded only when a call in it was fixed.
    fn whole(&mut self, text: &str, taken: &HashSet<String>) -> Option<Bytes> {
        let mut value = serde_json::from_str::<Value>(text).ok()?;
        self.fix(&mut value, taken)
            .then(|| Bytes::from(value.to_string()))
    }

    /// Fixes every call `value` opens or repeats; `true` when anything changed.
    fn fix(&mut self, value: &mut Value, taken: &HashSet<String>) -> bool {
        match value {
            Value::Object(map) => {
                let mut changed = match map.get("type").and_then(Value::as_str) {
                    Some("tool_use") => self.call(map, "id", Some("name"), taken),
                    Some("function_call") => self.call(map, "call_id", Some("name"), taken),
                    _ => false,
                };
                if let Some(Value::Array(deltas)) = map.get_mut("tool_calls") {
                    for delta in deltas.iter_mut().filter_map(Value::as_object_mut) {
                        if delta.contains_key("id") {
                            changed |= self.call(delta, "id", None, taken);
                            if let Some(function) =
                                delta.get_mut("function").and_then(Value::as_object_mut)
                            {
                                changed |= fix_name(function);
                            }
                        }
                    }
                }
                for (key, child) in map.iter_mut() {
                    if key != "tool_calls" {
                        changed |= self.fix(child, taken);
                    }
                }
                changed
            }
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, item| self.fix(item, taken) | changed),
            _ => false,
        }
    }

    /// One call's id (and name, where `name` says the field): `true` when either changed.
    fn call(
        &mut self,
        map: &mut Map<String, Value>,
        id_key: &str,
        name: Option<&str>,
        taken: &HashSet<String>,
    ) -> bool {
        let mut changed = name.is_some_and(|_| fix_name(map));
        let Some(id) = map.get(id_key).and_then(Value::as_str).map(str::to_owned) else {
            return changed;
        };
        let sent = match self.sent.get(&id) {
            Some(sent) => sent.clone(),
            None => {
                let used: HashSet<&String> = self.sent.values().collect();
                let fresh = calls::unique_id(&id, self.sent.len(), |candidate| {
                    taken.contains(candidate) || used.iter().any(|u| u.as_str() == candidate)
                });
                self.sent.insert(id.clone(), fresh.clone());
                fresh
            }
        };
        if sent != id {
            map.insert(id_key.to_owned(), Value::String(sent));
            changed = true;
        }
        changed
    }
}

/// A call's `name` made to follow the rule; `true` when it changed.
fn fix_name(map: &mut Map<String, Value>) -> bool {
    let Some(name) = map.get("name").and_then(Value::as_str) else {
        return false;
    };
    let valid = calls::valid_name(name);
    if valid == name {
        return false;
    }
    map.insert("name".into(), Value::String(valid));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(text: &str) -> Bytes {
        Bytes::from(text.to_owned())
    }

    #[test]
    fn events_without_a_call_and_calls_that_keep_the_rules_pass_byte_for_byte() {
        let mut ids = AnswerIds::default();
        let taken = HashSet::from(["toolu_old".to_owned()]);
        for text in [
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_new\",\"name\":\"Bash\",\"input\":{}}}\n\n",
        ] {
            assert_eq!(ids.frame(frame(text), &taken), frame(text));
        }
    }

    #[test]
    fn a_whole_answer_passes_as_sent_unless_a_call_in_it_repeats_the_history() {
        let mut ids = AnswerIds::default();
        let taken = HashSet::from(["toolu_old".to_owned()]);
        let fresh = "{\"type\": \"message\", \"content\": [{\"type\": \"tool_use\", \"id\": \"toolu_new\", \"name\": \"Read\", \"input\": {}}]}";
        assert_eq!(ids.frame(frame(fresh), &taken), frame(fresh));
        let repeated = "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"toolu_old\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"{}\"}}]}}]}";
        let out = ids.frame(frame(repeated), &taken);
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            value["choices"][0]["message"]["tool_calls"][0]["id"],
            "toolu_old_2"
        );
    }

    #[test]
    fn a_repeated_id_or_a_bad_name_is_fixed_and_the_answer_maps_it_the_same_way_again() {
        let mut ids = AnswerIds::default();
        let taken = HashSet::from(["call_1".to_owned()]);
        let added = "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"functions.read\"}}\n\n";
        let out = ids.frame(frame(added), &taken);
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.starts_with("event: response.output_item.added\ndata: "));
        let data: Value =
            serde_json::from_str(text.trim_end().split_once("data: ").unwrap().1).unwrap();
        assert_eq!(data["item"]["call_id"], "call_1_2");
        assert_eq!(data["item"]["name"], "read");
        let done = "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"read\"}}\n\n";
        let out = ids.frame(frame(done), &taken);
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.starts_with("data: "), "no event line was invented");
        assert!(text.contains("\"call_id\":\"call_1_2\""));
        // A Chat delta: only the one that opens the call carries an id.
        let chat = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"\",\"function\":{\"name\":\"a b\",\"arguments\":\"\"}}]}}]}\n\n";
        let out = ids.frame(frame(chat), &taken);
        let text = std::str::from_utf8(&out).unwrap();
        // An empty id becomes `call_<n>`, past the ids already taken or sent.
        assert!(text.contains("\"id\":\"call_1_3\""), "{text}");
        assert!(text.contains("\"name\":\"a_b\""));
    }
}
