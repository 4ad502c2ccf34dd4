//! OpenAI Chat Completions' stream: `chat.completion.chunk`s decoded into `ProviderEvent`s,
//! leniently where compatible servers differ (tool-call fragments matched by id and by index,
//! reasoning as `reasoning_content` or `reasoning`, usage on the finish chunk or its own, errors
//! as `event: error` or an `error` member).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use crate::providers::sse::{EventNormaliser, parse_json};
use crate::providers::{
    DraftCall, FinishReason, ProviderError, ProviderEvent, Usage, error_from_json, finish_turn,
};

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    /// A string, or (some servers) an array of `{type, text}` parts.
    #[serde(default)]
    content: Option<Value>,
    /// DeepSeek, llama.cpp, xAI.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// OpenRouter, Groq, Ollama.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
    /// The legacy single-function form.
    #[serde(default)]
    function_call: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// A string fragment; a few servers send a whole object instead.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
    /// DeepSeek's name for cached prompt tokens.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Deserialize)]
struct CompletionTokensDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// Chat Completions chunks in, `ProviderEvent`s out.
#[derive(Debug, Default)]
pub struct Normaliser {
    calls: Vec<DraftCall>,
    /// Which draft a fragment's `index` refers to: the most recent call seen at that index.
    by_index: HashMap<u64, usize>,
    finish_reason: Option<String>,
    usage: Usage,
    done: bool,
}

impl Normaliser {
    pub fn new() -> Self {
        Self::default()
    }

    fn tool_fragment(
        &mut self,
        index: Option<u64>,
        id: Option<&str>,
        function: Option<&FunctionDelta>,
    ) {
        let id = id.filter(|s| !s.is_empty());
        let name = function
            .and_then(|f| f.name.as_deref())
            .filter(|s| !s.is_empty());
        let arguments = function
            .and_then(|f| f.arguments.as_ref())
            .map(argument_text);
        let arguments = arguments.as_deref().unwrap_or("");

        // An id names its call wherever it appears; without one, the index does.
        let existing = match id {
            Some(id) => self.calls.iter().position(|c| c.id == id),
            None => match index {
                Some(i) => self.by_index.get(&i).copied(),
                None => self.calls.len().checked_sub(1),
            },
        };
        let slot = match existing {
            Some(slot) => slot,
            None => {
                let id = id.map_or_else(|| format!("call_{}", self.calls.len()), str::to_owned);
                self.calls.push(DraftCall {
                    id,
                    ..DraftCall::default()
                });
                self.calls.len() - 1
            }
        };
        if let Some(i) = index {
            self.by_index.insert(i, slot);
        }
        let call = &mut self.calls[slot];
        if call.name.is_empty()
            && let Some(name) = name
        {
            call.name = name.to_owned();
        }
        // A fragment that carries the id again after the arguments already form a whole JSON
        // document is the call being resent, not more of it: keep one copy.
        let resent = existing.is_some() && id.is_some() && is_complete_json(&call.arguments);
        if resent {
            if !arguments.is_empty() && is_complete_json(arguments) {
                call.arguments = arguments.to_owned();
            }
        } else {
            call.arguments.push_str(arguments);
        }
    }
}

fn argument_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn is_complete_json(text: &str) -> bool {
    !text.trim().is_empty() && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

impl EventNormaliser for Normaliser {
    fn feed(&mut self, event: &str, data: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        if event == "error" {
            return Err(error_from_json(None, &parse_json::<Value>(data)?));
        }
        let chunk: Chunk = parse_json(data)?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(error_from_json(None, &error));
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .or(usage.prompt_cache_hit_tokens);
            let reasoning = usage
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens);
            let input = usage.prompt_tokens.unwrap_or(0);
            let completion = usage.completion_tokens.unwrap_or(0);
            // xAI leaves reasoning out of `completion_tokens` but not out of `total_tokens`;
            // for everyone else the two ways of counting agree.
            let output = usage.total_tokens.map_or(completion, |total| {
                completion.max(total.saturating_sub(input))
            });
            self.usage = Usage {
                input_tokens: input,
                output_tokens: output,
                cached_input_tokens: cached,
                cache_write_tokens: None,
                reasoning_tokens: reasoning,
                server_tool_uses: None,
            };
        }
        let mut out = Vec::new();
        // Relay asks for one choice; another index would be a second, unrelated answer.
        for choice in chunk
            .choices
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.index.unwrap_or(0) == 0)
        {
            let delta = choice.delta.unwrap_or_default();
            for reasoning in [delta.reasoning_content, delta.reasoning]
                .into_iter()
                .flatten()
            {
                if !reasoning.is_empty() {
                    out.push(ProviderEvent::Reasoning(reasoning));
                }
            }
            match delta.content {
                Some(Value::String(text)) if !text.is_empty() => {
                    out.push(ProviderEvent::Text(text))
                }
                Some(Value::Array(parts)) => out.extend(content_parts(&parts)),
                _ => {}
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.tool_fragment(call.index, call.id.as_deref(), call.function.as_ref());
            }
            if let Some(function) = delta.function_call {
                self.tool_fragment(Some(0), None, Some(&function));
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<ProviderEvent, ProviderError> {
        // `[DONE]` alone is an end too: some OpenRouter routes never send a finish_reason.
        if self.finish_reason.is_none() && !self.done {
            return Err(ProviderError::Protocol(
                "the stream ended before the answer finished".into(),
            ));
        }
        let reason = match self.finish_reason.as_deref() {
            Some("length") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        };
        Ok(finish_turn(
            reason,
            std::mem::take(&mut self.calls),
            self.usage,
        ))
    }

    fn is_complete(&self) -> bool {
        self.done
    }
}

/// Content given as parts (Mistral and a few others): text parts are answer, thinking parts
/// are reasoning.
fn content_parts(parts: &[Value]) -> Vec<ProviderEvent> {
    parts
        .iter()
        .filter_map(|part| {
            let text = part
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())?;
            match part.get("type").and_then(Value::as_str) {
                Some("thinking" | "reasoning") => Some(ProviderEvent::Reasoning(text.to_owned())),
                _ => Some(ProviderEvent::Text(text.to_owned())),
            }
        })
        .collect()
}
