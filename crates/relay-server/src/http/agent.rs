//! `POST /v1/agent/stream` and `GET /v1/tools`: Relay's own agent API over the leg service
//! (`legs`), its events as NDJSON lines.

use std::convert::Infallible;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use relay_wire::ErrorBody;
use relay_wire::agent::{AgentEvent, AgentRequest};
use relay_wire::tools::{ToolRole, ToolsResponse, catalogue};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::accounts::Caller;
use crate::error::ApiResult;
use crate::http::extract::{Json, Query};
use crate::http::state::AppState;
use crate::legs::{self, LegEvent};

/// Request bodies of agent legs may be this large (long conversations).
pub const BODY_LIMIT: usize = legs::BODY_LIMIT;

/// Run one agent leg and stream it as NDJSON.
///
/// The project's notes are one block placed after the client's system prompt (a system block or
/// message of its own), ranked against the conversation's first user message, so the block is
/// byte-identical on every leg of a conversation until the project's notes change, and the
/// provider's prompt cache of everything before it stays valid. An `anthropic` provider gets
/// cache breakpoints at the end of the tools, of the client's system prompt and at the newest
/// message (three of Anthropic's four); OpenAI's API gets a `prompt_cache_key` derived from the
/// user and the conversation's first user message. `usage` reports `cached_input_tokens` and
/// `cache_write_tokens` as the provider counted them, both part of `input_tokens`.
#[utoipa::path(post, path = "/v1/agent/stream", tag = "agent",
    security(("bearer" = [])),
    request_body = AgentRequest,
    responses(
        (status = 200, description = "NDJSON, one `AgentEvent` per line: `start`, then `text`/`reasoning`/`ping`, then exactly one of `tool_calls`, `done`, `error`",
            content_type = "application/x-ndjson", body = relay_wire::agent::AgentEvent),
        (status = 400, description = "`invalid_request` or `unknown_model`; costs no quota", body = ErrorBody),
        (status = 403, description = "`quota_exceeded`, or `budget_exceeded` (the monthly token budget is used up); costs no quota", body = ErrorBody),
        (status = 429, description = "`rate_limited` (per caller, or every model was rate limited); see Retry-After", body = ErrorBody),
        (status = 502, description = "`upstream_error`: every model failed before any output; `upstream_event_too_large`: the provider sent an event larger than `[routing] max_event_bytes`", body = ErrorBody),
        (status = 503, description = "`provider_unavailable`: no provider could be reached", body = ErrorBody),
    ))]
pub async fn stream_leg(
    State(state): State<AppState>,
    caller: Caller,
    headers: axum::http::HeaderMap,
    Json(body): Json<AgentRequest>,
) -> ApiResult<Response> {
    let arrived = Instant::now();
    // The body is already read here (the extractor), so only the rate limit is checked before
    // validation; quota and budget are decided once, at admission (`Legs::open`).
    let legs = state.legs();
    legs.rate_limit(&caller).await?;
    let model = body.model.clone();
    let leg = legs::validate(body)?;
    let request_id = crate::http::extract::request_id(&headers);
    let opened = legs
        .open(&caller, request_id, model.as_deref(), leg, arrived)
        .await?;
    Ok(ndjson(opened.events))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolsQuery {
    /// `worker`, `orchestrator` or `agent_orchestrator`; absent for the normal role.
    #[serde(default)]
    pub tool_role: Option<ToolRole>,
}

/// The canonical tool catalogue for a role.
#[utoipa::path(get, path = "/v1/tools", tag = "agent",
    security(("bearer" = [])),
    params(ToolsQuery),
    responses(
        (status = 200, description = "The tools that role is sent, with their canonical definitions", body = ToolsResponse),
        (status = 400, description = "Unknown tool_role", body = ErrorBody),
    ))]
pub async fn get_tools(_caller: Caller, Query(q): Query<ToolsQuery>) -> axum::Json<ToolsResponse> {
    axum::Json(ToolsResponse {
        tools: catalogue(q.tool_role),
    })
}

/// The leg's events as NDJSON lines.
pub fn ndjson(events: futures::stream::BoxStream<'static, LegEvent>) -> Response {
    // A native leg never asks for a provider's own bytes; they have no NDJSON form.
    let body = events.filter_map(|event| async move {
        match event {
            LegEvent::Wire(event) => Some(Ok::<Bytes, Infallible>(encode(&event))),
            LegEvent::Raw(_) => None,
        }
    });
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Tell buffering proxies (nginx) to pass each line on at once.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn encode(event: &AgentEvent) -> Bytes {
    let mut line = serde_json::to_vec(event).unwrap_or_else(|_| br#"{"event":"ping"}"#.to_vec());
    line.push(b'\n');
    Bytes::from(line)
}
