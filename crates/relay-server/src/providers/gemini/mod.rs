//! Gemini `streamGenerateContent?alt=sse` (`POST {base_url}/v1beta/models/{model}:...`).
//!
//! Every SSE event is a whole `GenerateContentResponse`. Function calls usually arrive whole,
//! with their arguments as an object; Vertex's `streamFunctionCallArguments` instead opens a
//! call (`willContinue`), streams `partialArgs` addressed by JSON path, and closes it with an
//! empty `functionCall`. Gemini often sends no call ids, so missing ones are made up from the
//! call's position (`call_0`, `call_1`, ...): stable within a turn, which is all a tool result
//! needs to find its call.
//!
//! This file maps requests; `stream.rs` decodes the stream.

use std::sync::Arc;
mod stream;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::transport::endpoint::{self, Endpoint, KeyHeader};
use super::transport::lanes::Lanes;
use super::{ChatMessage, ChatRequest, EventStream, Provider, ProviderError, ToolChoice};

pub use stream::Normaliser;

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
    pub fn new(base_url: String, api_key: Option<String>, lanes: Arc<Lanes>) -> Self {
        Self {
            endpoint: Endpoint::new(
                base_url,
                DEFAULT_BASE_URL,
                api_key,
                KeyHeader::Named("x-goog-api-key"),
                lanes,
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
            .post_sse(
                self.url(&request.model)?,
                endpoint::json(&body(&request))?,
                &[],
            )
            .await?;
        Ok(endpoint::stream_response(response, Normaliser::new()))
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
        // The notes are a part of their own after the client's text: the prefix stays stable.
        system_instruction: {
            let parts: Vec<Part<'_>> = [request.system.as_deref(), request.notes.as_deref()]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .map(|text| Part {
                    text: Some(text),
                    ..Part::default()
                })
                .collect();
            (!parts.is_empty()).then_some(Content { role: None, parts })
        },
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
