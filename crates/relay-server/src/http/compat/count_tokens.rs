//! `POST /v1/messages/count_tokens`: Anthropic's token counting, which Claude Code calls through a
//! gateway. When the model (or `auto`'s first) is on an `anthropic` provider, that provider's own
//! endpoint counts, with its key and the upstream model name; otherwise, or if it fails, Relay
//! estimates (about four characters a token over the system prompt, messages and tools). No quota
//! unit is used either way, but counts are rate-limited per account like legs (a limit of their
//! own), refused once the account's token budget is spent, and the provider's answer is bounded:
//! 1 MiB (`providers::anthropic`) within `[routing] idle_timeout_ms`.

use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::{Api, errors};
use crate::error::ApiError;
use crate::http::state::AppState;

/// Characters per token in the estimate (English prose and code average about four).
const CHARS_PER_TOKEN: usize = 4;

/// `{input_tokens}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenCount {
    /// The provider's count, or Relay's estimate: the request's text length over four, rounded up.
    pub input_tokens: u64,
}

/// The characters of every string in `value`, with the keys when `keys` (tool schemas: the model
/// reads them as text; a message's field names it does not).
fn chars(value: &Value, keys: bool) -> usize {
    match value {
        Value::String(s) => s.chars().count(),
        Value::Array(items) => items.iter().map(|v| chars(v, keys)).sum(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| if keys { k.len() } else { 0 } + chars(v, keys))
            .sum(),
        Value::Number(n) => n.to_string().len(),
        Value::Bool(_) | Value::Null => 0,
    }
}

/// The estimate for a Messages request body.
pub fn estimate(body: &Value) -> u64 {
    let text = chars(&body["system"], false)
        + chars(&body["messages"], false)
        + chars(&body["tools"], true);
    text.div_ceil(CHARS_PER_TOKEN) as u64
}

/// Anthropic's token counting: the provider's own when it is Anthropic's API, else Relay's
/// estimate. `?beta=true` is accepted.
#[utoipa::path(post, path = "/v1/messages/count_tokens", tag = "compatible",
    security(("bearer" = [])),
    params(
        ("x-api-key" = Option<String>, Header, description = "The token, as the Anthropic SDK sends it"),
        ("anthropic-version" = Option<String>, Header, description = "Accepted and ignored"),
    ),
    request_body(content = Object, description = "A Messages request (`model`, `messages`, optional `system` and `tools`); `max_tokens` is not needed"),
    responses(
        (status = 200, description = "`{input_tokens}`: from an `anthropic` provider's own endpoint, else an estimate (about four characters a token over the text)", body = TokenCount),
        (status = 400, description = "`invalid_request_error`", body = super::anthropic::AnthropicErrorBody),
        (status = 401, description = "`authentication_error`", body = super::anthropic::AnthropicErrorBody),
        (status = 403, description = "`permission_error`: the account's monthly token budget is used up (`budget_exceeded`); in open mode also Relay's `forbidden` for another web origin or a host name that is not loopback or in `allowed_hosts`", body = super::anthropic::AnthropicErrorBody),
        (status = 429, description = "`rate_limit_error`: the account's counts exceed `[limits] agent_per_minute` and `agent_burst` (counted apart from legs); see Retry-After", body = super::anthropic::AnthropicErrorBody),
    ))]
pub async fn count_tokens(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    run(state, headers, body)
        .await
        .unwrap_or_else(|e| errors::respond(Api::Anthropic, e))
}

async fn run(
    state: AppState,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let caller = super::caller(&state, &headers, Api::Anthropic).await?;
    // Quota-exempt, but each count may be a provider call on the operator's key: rate-limited per
    // account like legs, and refused once the account's token budget is spent.
    state.limits().count_tokens.check(caller.user_id()).await?;
    crate::usage::budget::check(
        state.ledger().store().as_ref(),
        state.budget_defaults(),
        match &caller {
            crate::accounts::Caller::User(user) => Some(user.id.as_str()),
            crate::accounts::Caller::Local => None,
        },
    )
    .await?;
    // Read only now: an unauthenticated, rate-limited or spent caller costs no upload.
    let body = super::read_body(&state, body).await?;
    let body: Value = crate::http::extract::parse_json(&body)?;
    if !body["model"].is_string() {
        return Err(ApiError::invalid("model: a string is required"));
    }
    if body["messages"].as_array().is_none_or(Vec::is_empty) {
        return Err(ApiError::invalid("messages: a non-empty array is required"));
    }
    // A model the account may not use is refused here as on the Messages door.
    if let Some(model) = body["model"].as_str()
        && state.models().resolve(Some(model)).is_some()
    {
        state.legs().chain_for(&caller, Some(model))?;
    }
    let input_tokens = match forwarded(&state, body.clone()).await {
        Some(n) => n,
        None => estimate(&body),
    };
    Ok(axum::Json(TokenCount { input_tokens }).into_response())
}

/// The count from the model's provider when it has a counting endpoint; `None` to estimate.
async fn forwarded(state: &AppState, mut body: Value) -> Option<u64> {
    let models = state.models();
    let entry = models.resolve(body["model"].as_str())?.into_iter().next()?;
    body["model"] = Value::String(entry.upstream.clone());
    // The whole call, answer included, within `[routing] idle_timeout_ms`: a provider that stalls
    // costs the caller that long at most, then Relay estimates.
    let within = Duration::from_millis(state.config().routing.idle_timeout_ms);
    match tokio::time::timeout(within, entry.provider.count_tokens(body)).await {
        Err(_) => {
            tracing::warn!(provider = %entry.provider_name, "count_tokens timed out upstream; estimating");
            None
        }
        Ok(counted) => match counted? {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::warn!(provider = %entry.provider_name, error = e.kind(), "count_tokens failed upstream; estimating");
                None
            }
        },
    }
}
