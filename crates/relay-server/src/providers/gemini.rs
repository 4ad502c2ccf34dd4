//! Gemini `streamGenerateContent?alt=sse` (`POST {base_url}/v1beta/models/{model}:...`).
//!
//! Every SSE event is a whole `GenerateContentResponse`. Function calls usually arrive whole,
//! with their arguments as an object; Vertex's `streamFunctionCallArguments` instead opens a
//! call (`willContinue`), streams `partialArgs` addressed by JSON path, and closes it with an
//! empty `functionCall`. Gemini often sends no call ids, so missing ones are made up from the
//! call's position (`call_0`, `call_1`, ...): stable within a turn, which is all a tool result
//! needs to find its call.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::endpoint::{Endpoint, KeyHeader};
use super::sse::{self, EventNormaliser, parse_json};
use super::{
    ChatMessage, ChatRequest, DraftCall, EventStream, FinishReason, Provider, ProviderError,
    ProviderEvent, ToolChoice, Usage, error_from_json, finish_turn,
};

pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// Google's documented stand-in for a thought signature Relay did not keep. Gemini 3 refuses
/// a replayed function call without a signature; Relay's tool calls carry none.
const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// The Gemini API adapter.
#[derive(Clone, Debug)]
pub struct GeminiProvider {
    endpoint: Endpoint,
}

impl GeminiProvider {
    /// `base_url` ends before `/v1beta`; empty means Google's.
    pub fn new(base_url: String, api_key: Option<String>, http: reqwest::Client) -> Self {
        Self {
            endpoint: Endpoint::new(
                base_url,
                DEFAULT_BASE_URL,
                api_key,
                KeyHeader::Named("x-goog-api-key"),
                http,
            ),
        }
    }

    fn url(&self, model: &str) -> Result<reqwest::Url, ProviderError> {
        let invalid = || ProviderError::Connect("the provider's base URL is not usable".into());
        let mut url = reqwest::Url::parse(self.endpoint.base_url()).map_err(|_| invalid())?;
        let model = model.strip_prefix("models/").unwrap_or(model);
        // Path segments are percent-encoded by `Url`, so a model name cannot reshape the path.
        url.path_segments_mut()
            .map_err(|_| invalid())?
            .pop_if_empty()
            .extend([
                "v1beta",
                "models",
                &format!("{model}:streamGenerateContent"),
            ]);
        url.query_pairs_mut().append_pair("alt", "sse");
        Ok(url)
    }
}

#[async_trait]
impl Provider for GeminiProvider {
    fn kind(&self) -> &'static str {
        "gemini"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        // The key goes in a header, never in the `?key=` query: URLs end up in logs.
        let response = self
            .endpoint
            .post_sse(self.url(&request.model)?, &body(&request), &[])
            .await?;
        Ok(sse::stream_response(response, Normaliser::new()))
    }
}

fn body(request: &ChatRequest) -> Body<'_> {
    let generation_config =
        (request.max_tokens.is_some() || request.temperature.is_some() || !request.stop.is_empty())
            .then_some(GenerationConfig {
                max_output_tokens: request.max_tokens,
                temperature: request.temperature,
                stop_sequences: &request.stop,
            });
    let declarations: Vec<_> = request
        .tools
        .iter()
        .map(|t| FunctionDeclaration {
            name: &t.name,
            description: &t.description,
            parameters_json_schema: &t.parameters,
        })
        .collect();
    Body {
        contents: contents(request),
        system_instruction: request
            .system
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|text| Content {
                role: None,
                parts: vec![Part {
                    text: Some(text),
                    ..Part::default()
                }],
            }),
        tools: if declarations.is_empty() {
            Vec::new()
        } else {
            vec![ToolGroup {
                function_declarations: declarations,
            }]
        },
        generation_config,
        tool_config: tool_config(request),
    }
}

/// `functionCallingConfig`: mode `AUTO`, `NONE` or `ANY`, and `ANY` limited to one
/// function when the caller named it.
fn tool_config(request: &ChatRequest) -> Option<Value> {
    let choice = request
        .tool_choice
        .as_ref()
        .filter(|_| !request.tools.is_empty())?;
    let config = match choice {
        ToolChoice::Auto => json!({"mode": "AUTO"}),
        ToolChoice::None => json!({"mode": "NONE"}),
        ToolChoice::Required => json!({"mode": "ANY"}),
        ToolChoice::Function(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    };
    Some(json!({"functionCallingConfig": config}))
}

/// Relay's messages as Gemini contents: roles `user` and `model`, consecutive turns of one
/// role merged (parallel calls must be answered by one content holding all the responses).
fn contents(request: &ChatRequest) -> Vec<Content<'_>> {
    // Models before Gemini 3 neither need nor expect the stand-in signature.
    let model = request
        .model
        .strip_prefix("models/")
        .unwrap_or(&request.model);
    let wants_signature = !(model.starts_with("gemini-1") || model.starts_with("gemini-2"));
    let mut out: Vec<Content<'_>> = Vec::new();
    for (position, message) in request.messages.iter().enumerate() {
        let (role, parts) = match message {
            ChatMessage::User { content } => (
                "user",
                vec![Part {
                    text: Some(content),
                    ..Part::default()
                }],
            ),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                let mut parts = Vec::new();
                if !content.is_empty() {
                    parts.push(Part {
                        text: Some(content),
                        ..Part::default()
                    });
                }
                for (i, call) in tool_calls.iter().enumerate() {
                    parts.push(Part {
                        function_call: Some(WireFunctionCall {
                            id: &call.id,
                            name: &call.name,
                            args: call_args(&call.arguments),
                        }),
                        // Gemini puts the signature on the first call of a turn only.
                        thought_signature: (wants_signature && i == 0).then_some(SKIP_SIGNATURE),
                        ..Part::default()
                    });
                }
                if parts.is_empty() {
                    continue;
                }
                ("model", parts)
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                let mut response = Map::new();
                response.insert("result".to_owned(), Value::String(content.clone()));
                let part = Part {
                    function_response: Some(WireFunctionResponse {
                        id: tool_call_id,
                        name: tool_name(&request.messages[..position], tool_call_id),
                        response: Value::Object(response),
                    }),
                    ..Part::default()
                };
                ("user", vec![part])
            }
        };
        match out.last_mut() {
            Some(last) if last.role == Some(role) => last.parts.extend(parts),
            _ => out.push(Content {
                role: Some(role),
                parts,
            }),
        }
    }
    out
}

/// A function response must name its function; the latest earlier call with that id does.
fn tool_name<'a>(earlier: &'a [ChatMessage], id: &'a str) -> &'a str {
    earlier
        .iter()
        .rev()
        .find_map(|m| match m {
            ChatMessage::Assistant { tool_calls, .. } => tool_calls
                .iter()
                .find(|c| c.id == id)
                .map(|c| c.name.as_str()),
            _ => None,
        })
        // Relay's route refuses a tool result that matches no call; this is only a fallback.
        .unwrap_or(id)
}

/// `functionCall.args` must be an object.
fn call_args(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::Object(Map::new()),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: Vec<Content<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Content<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolGroup<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_config: Option<GenerationConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<Value>,
}

#[derive(Serialize)]
struct Content<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    parts: Vec<Part<'a>>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_call: Option<WireFunctionCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_response: Option<WireFunctionResponse<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<&'static str>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    id: &'a str,
    name: &'a str,
    args: Value,
}

#[derive(Serialize)]
struct WireFunctionResponse<'a> {
    id: &'a str,
    name: &'a str,
    response: Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolGroup<'a> {
    function_declarations: Vec<FunctionDeclaration<'a>>,
}

/// `parametersJsonSchema` takes a client's JSON Schema as it is; the older `parameters`
/// refuses common keywords such as `additionalProperties`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionDeclaration<'a> {
    name: &'a str,
    description: &'a str,
    parameters_json_schema: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
}

// ---- the stream ----

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
