//! The tool calls a leg emits, made acceptable to the next leg on every door (issue 31, point 4).
//!
//! Providers, small local models above all, emit calls that the leg validator (`request.rs`)
//! would refuse when the client sends them back in the history: a name outside
//! `[A-Za-z0-9_-]{1,64}` (`functions.read_file`), arguments that are not JSON
//! (`{"path":"a.txt"} trailing`), an empty id, an id given twice (two Anthropic blocks with one
//! id) or one an earlier turn already used. Relay emits only what it accepts, so a conversation
//! never dies on its own output. The rule, applied once to every `tool_calls` event whatever the
//! door or provider:
//! - name: a leading `functions.` (OpenAI's own namespace, which models repeat) is dropped, then
//!   every character outside the rule becomes `_`, and the name is cut to 64 bytes;
//! - arguments that are not valid JSON become `{"_raw": "<the text as sent>"}`: valid JSON every
//!   provider takes back (an object, as Anthropic's `input` must be), which the client's own
//!   argument check reports to the model as invalid;
//! - an empty id becomes `call_<n>` (its position); an id already taken, in this turn or by a
//!   call in the history, gets the first free suffix `_2`, `_3`, …

use std::collections::HashSet;

use crate::providers::ToolCall;

/// The longest tool name every provider accepts (OpenAI's rule).
const MAX_NAME: usize = 64;

/// `calls` as the next leg will accept them; `taken` holds the call ids of the leg's history.
pub fn normalise(calls: Vec<ToolCall>, taken: &HashSet<String>) -> Vec<ToolCall> {
    let mut used: HashSet<String> = HashSet::new();
    calls
        .into_iter()
        .enumerate()
        .map(|(i, call)| {
            let id = unique_id(&call.id, i, |id| taken.contains(id) || used.contains(id));
            used.insert(id.clone());
            ToolCall {
                id,
                name: valid_name(&call.name),
                arguments: valid_arguments(call.arguments),
            }
        })
        .collect()
}

pub(super) fn valid_name(name: &str) -> String {
    let name = match name.strip_prefix("functions.") {
        Some(rest) if !rest.is_empty() => rest,
        _ => name,
    };
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    out.truncate(MAX_NAME);
    if out.is_empty() {
        out.push('_');
    }
    out
}

fn valid_arguments(arguments: String) -> String {
    if serde_json::from_str::<serde::de::IgnoredAny>(&arguments).is_ok() {
        return arguments;
    }
    serde_json::json!({ "_raw": arguments }).to_string()
}

pub(super) fn unique_id(id: &str, position: usize, taken: impl Fn(&str) -> bool) -> String {
    let base = if id.is_empty() {
        format!("call_{position}")
    } else {
        id.to_owned()
    };
    if !taken(&base) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}_{n}"))
        .find(|candidate| !taken(candidate))
        .unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn names_arguments_and_ids_come_out_valid() {
        let taken = HashSet::from(["c1".to_owned()]);
        let out = normalise(
            vec![
                call("c1", "functions.read_file", r#"{"path":"a.txt"} trailing"#),
                call("", "run shell", "{}"),
                call("d", "é/x", "{}"),
                call("d", "ok", "{}"),
            ],
            &taken,
        );
        let ids: Vec<&str> = out.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c1_2", "call_1", "d", "d_2"]);
        let names: Vec<&str> = out.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["read_file", "run_shell", "__x", "ok"]);
        let raw: serde_json::Value = serde_json::from_str(&out[0].arguments).unwrap();
        assert_eq!(
            raw,
            serde_json::json!({"_raw": "{\"path\":\"a.txt\"} trailing"})
        );
        assert_eq!(valid_name(&"x".repeat(100)).len(), 64);
    }
}
