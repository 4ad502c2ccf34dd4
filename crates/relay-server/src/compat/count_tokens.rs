//! `POST /v1/messages/count_tokens`: Anthropic's token counting, which Claude Code calls through a
//! gateway. Relay counts itself, as an estimate (about four characters a token over the text of
//! the system prompt, the messages and the tools): no provider is called and no quota is used.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{Api, errors};
use crate::error::ApiError;
use crate::state::AppState;

/// Characters per token in the estimate (English prose and code average about four).
const CHARS_PER_TOKEN: usize = 4;

/// `{input_tokens}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenCount {
    /// An estimate: the request's text length over four, rounded up.
    pub input_tokens: u64,
}

/// The characters of every string in `value` (keys of tool schemas included: the model reads them).
fn chars(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count(),
        Value::Array(items) => items.iter().map(chars).sum(),
        Value::Object(map) => map.iter().map(|(k, v)| k.len() + chars(v)).sum(),
        Value::Number(n) => n.to_string().len(),
        Value::Bool(_) | Value::Null => 0,
    }
}

/// The estimate for a Messages request body.
pub fn estimate(body: &Value) -> u64 {
    let text: usize = ["system", "messages", "tools"]
        .iter()
        .map(|field| chars(&body[*field]))
        .sum();
    text.div_ceil(CHARS_PER_TOKEN) as u64
}

/// Anthropic's token counting, estimated by Relay. `?beta=true` is accepted.
#[utoipa::path(post, path = "/v1/messages/count_tokens", tag = "compatible",
    security(("bearer" = [])),
    params(
        ("x-api-key" = Option<String>, Header, description = "The token, as the Anthropic SDK sends it"),
        ("anthropic-version" = Option<String>, Header, description = "Accepted and ignored"),
    ),
    request_body(content = Object, description = "A Messages request (`model`, `messages`, optional `system` and `tools`); `max_tokens` is not needed"),
    responses(
        (status = 200, description = "`{input_tokens}`: an estimate, about four characters a token over the text", body = TokenCount),
        (status = 400, description = "`invalid_request_error`", body = super::anthropic::AnthropicErrorBody),
        (status = 401, description = "`authentication_error`", body = super::anthropic::AnthropicErrorBody),
    ))]
pub async fn count_tokens(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run(state, headers, body)
        .await
        .unwrap_or_else(|e| errors::respond(Api::Anthropic, e))
}

async fn run(state: AppState, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    super::caller(&state, &headers, Api::Anthropic).await?;
    let body: Value = crate::extract::parse_json(&body)?;
    if !body["model"].is_string() {
        return Err(ApiError::invalid("model: a string is required"));
    }
    if !body["messages"].as_array().is_some_and(|m| !m.is_empty()) {
        return Err(ApiError::invalid("messages: a non-empty array is required"));
    }
    Ok(axum::Json(TokenCount {
        input_tokens: estimate(&body),
    })
    .into_response())
}
