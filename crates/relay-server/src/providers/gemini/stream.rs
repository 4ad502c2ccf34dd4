//! Gemini's stream: each SSE event a whole `GenerateContentResponse`, decoded into
//! `ProviderEvent`s, with Vertex `partialArgs` applied by JSON path.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::providers::sse::{EventNormaliser, parse_json};
use crate::providers::{
    DraftCall, FinishReason, ProviderError, ProviderEvent, Usage, error_from_json, finish_turn,
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    candidates: Option<Vec<Candidate>>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    content: Option<CandidateContent>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CandidateContent {
    #[serde(default)]
    parts: Option<Vec<WirePart>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePart {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default)]
    function_call: Option<FunctionCallPart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCallPart {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Value>,
    /// `[{jsonPath, stringValue | numberValue | boolValue | nullValue, willContinue}]`
    #[serde(default)]
    partial_args: Option<Vec<Value>>,
    #[serde(default)]
    will_continue: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// `GenerateContentResponse` chunks in, `ProviderEvent`s out.
#[derive(Debug, Default)]
pub struct Normaliser {
    calls: Vec<DraftCall>,
    /// The call whose arguments are still streaming, with the arguments so far.
    open: Option<(usize, Value)>,
    prompt: Option<u64>,
    candidates: Option<u64>,
    thoughts: Option<u64>,
    cached: Option<u64>,
    finish_reason: Option<String>,
    blocked: bool,
}

impl Normaliser {
    pub fn new() -> Self {
        Self::default()
    }

    fn function_call(&mut self, call: FunctionCallPart) {
        let continues = call.will_continue.unwrap_or(false);
        if let Some(name) = call.name.filter(|n| !n.is_empty()) {
            // A named part starts a call; one still open was left unterminated.
            self.close_open();
            let id = call.id.filter(|i| !i.is_empty());
            let mut args = call.args.unwrap_or_else(|| Value::Object(Map::new()));
            apply_partial_args(&mut args, call.partial_args.as_deref().unwrap_or_default());
            // A call sent again under its id replaces the earlier copy instead of adding one.
            let known = id
                .as_ref()
                .and_then(|id| self.calls.iter().position(|c| &c.id == id));
            let slot = match known {
                Some(slot) => slot,
                None => {
                    let id = id.unwrap_or_else(|| format!("call_{}", self.calls.len()));
                    self.calls.push(DraftCall {
                        id,
                        name,
                        arguments: String::new(),
                    });
                    self.calls.len() - 1
                }
            };
            self.open = Some((slot, args));
            if !continues {
                self.close_open();
            }
        } else if let Some((_, args)) = self.open.as_mut() {
            apply_partial_args(args, call.partial_args.as_deref().unwrap_or_default());
            if !continues {
                self.close_open();
            }
        }
    }

    fn close_open(&mut self) {
        if let Some((slot, args)) = self.open.take() {
            self.calls[slot].arguments = args.to_string();
        }
    }
}

impl EventNormaliser for Normaliser {
    fn feed(&mut self, event: &str, data: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
        let value: Value = parse_json(data)?;
        if event == "error" || value.get("error").is_some_and(|e| !e.is_null()) {
            return Err(error_from_json(None, &value));
        }
        let chunk: Chunk = serde_json::from_value(value)
            .map_err(|e| ProviderError::Protocol(format!("an unexpected chunk shape ({e})")))?;
        if let Some(usage) = chunk.usage_metadata {
            // Counts are running totals; keep the latest of each that was given.
            self.prompt = usage.prompt_token_count.or(self.prompt);
            self.candidates = usage.candidates_token_count.or(self.candidates);
            self.thoughts = usage.thoughts_token_count.or(self.thoughts);
            self.cached = usage.cached_content_token_count.or(self.cached);
        }
        if chunk.prompt_feedback.and_then(|f| f.block_reason).is_some() {
            self.blocked = true;
        }
        let mut out = Vec::new();
        for candidate in chunk
            .candidates
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.index.unwrap_or(0) == 0)
        {
            let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
            for part in parts {
                if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                    out.push(if part.thought == Some(true) {
                        ProviderEvent::Reasoning(text)
                    } else {
                        ProviderEvent::Text(text)
                    });
                }
                if let Some(call) = part.function_call {
                    self.function_call(call);
                }
            }
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<ProviderEvent, ProviderError> {
        if self.finish_reason.is_none() && !self.blocked {
            return Err(ProviderError::Protocol(
                "the stream ended before the answer finished".into(),
            ));
        }
        self.close_open();
        let reason = match self.finish_reason.as_deref() {
            None => FinishReason::ContentFilter, // the prompt itself was blocked
            Some("MAX_TOKENS") => FinishReason::Length,
            Some(
                "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
                | "IMAGE_SAFETY",
            ) => FinishReason::ContentFilter,
            Some(_) => FinishReason::Stop,
        };
        let usage = Usage {
            input_tokens: self.prompt.unwrap_or(0),
            // Thinking tokens are billed as output but counted apart.
            output_tokens: self.candidates.unwrap_or(0) + self.thoughts.unwrap_or(0),
            cached_input_tokens: self.cached,
            cache_write_tokens: None,
            reasoning_tokens: self.thoughts,
            server_tool_uses: None,
        };
        Ok(finish_turn(reason, std::mem::take(&mut self.calls), usage))
    }
}

/// Applies Vertex `partialArgs` to the arguments object: each names a JSON path (`$.a.b[0]`)
/// and a value; string values at one path are pieces of one string.
fn apply_partial_args(args: &mut Value, partials: &[Value]) {
    for partial in partials {
        let Some(path) = partial.get("jsonPath").and_then(Value::as_str) else {
            continue;
        };
        let Some(segments) = parse_path(path) else {
            continue;
        };
        let slot = locate(args, &segments);
        if let Some(piece) = partial.get("stringValue").and_then(Value::as_str) {
            match slot {
                Value::String(s) => s.push_str(piece),
                other => *other = Value::String(piece.to_owned()),
            }
        } else if let Some(number) = partial.get("numberValue").filter(|v| v.is_number()) {
            *slot = number.clone();
        } else if let Some(flag) = partial.get("boolValue").and_then(Value::as_bool) {
            *slot = Value::Bool(flag);
        } else if partial.get("nullValue").is_some() {
            *slot = Value::Null;
        }
    }
}

enum Segment {
    Key(String),
    Index(usize),
}

/// `$.a.b[0]['c d']` → [a, b, 0, "c d"]; None for anything else.
fn parse_path(path: &str) -> Option<Vec<Segment>> {
    let mut rest = path.strip_prefix('$')?;
    let mut segments = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            segments.push(Segment::Key(after[..end].to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let inner = &after[..end];
            let quoted = inner
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            segments.push(match quoted {
                Some(key) => Segment::Key(key.to_owned()),
                // A bound, so a path cannot make us allocate a huge array.
                None => Segment::Index(inner.parse().ok().filter(|i| *i < 4096)?),
            });
            rest = &after[end + 1..];
        } else {
            return None;
        }
    }
    Some(segments)
}

/// The value at `segments`, creating objects and arrays on the way.
fn locate<'a>(mut value: &'a mut Value, segments: &[Segment]) -> &'a mut Value {
    for segment in segments {
        value = match segment {
            Segment::Key(key) => {
                if !value.is_object() {
                    *value = Value::Object(Map::new());
                }
                match value {
                    Value::Object(map) => map.entry(key.clone()).or_insert(Value::Null),
                    _ => return value,
                }
            }
            Segment::Index(index) => {
                if !value.is_array() {
                    *value = Value::Array(Vec::new());
                }
                match value {
                    Value::Array(items) => {
                        if items.len() <= *index {
                            items.resize(index + 1, Value::Null);
                        }
                        &mut items[*index]
                    }
                    _ => return value,
                }
            }
        };
    }
    value
}
