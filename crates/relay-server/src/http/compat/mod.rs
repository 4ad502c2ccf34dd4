//! The compatible endpoints: OpenAI Chat Completions and Responses, Anthropic Messages and the
//! models list, so tools and SDKs that speak those APIs can point their base URL at Relay.
//!
//! Each request is translated into a leg (`agent::validate`) and run through the leg machinery
//! (`agent::open_leg`: model routing with fallback, rate limit, quota, note injection) by one
//! sequence, `door::serve`; only the translation of the request and the encoding of the answer
//! and of the errors are each API's own (a `door::Door`).

pub mod anthropic;
pub mod count_tokens;
pub mod door;
pub mod errors;
pub mod models;
pub mod openai;
pub mod responses;

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use futures::stream::BoxStream;
use relay_wire::agent::AgentRequest;
use relay_wire::tools::ToolDef;

use crate::accounts::Caller;
use crate::domain::ProjectId;
use crate::error::ApiError;
use crate::http::agent::{self, Opened};
use crate::http::state::AppState;
use crate::providers::ToolSpec;
use crate::providers::passthrough::{Family, Passthrough};
pub use errors::Api;

/// Bodies may be as large as a leg's (long conversations).
pub const BODY_LIMIT: usize = agent::BODY_LIMIT;

/// The receipt header: the ids of the notes injected, comma-separated.
pub const NOTE_IDS: &str = "x-relay-note-ids";

/// The caller behind `Authorization: Bearer`, or on Anthropic's API also `x-api-key`.
pub async fn caller(state: &AppState, headers: &HeaderMap, api: Api) -> Result<Caller, ApiError> {
    let token = crate::accounts::bearer_token(headers).or_else(|| match api {
        Api::Anthropic => headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|t| !t.is_empty()),
        Api::OpenAi => None,
    });
    Caller::from_token(state, token).await
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The project whose notes are injected: `x-relay-project`, else derived from
/// `x-relay-git-remote`, else `x-relay-cwd`, as a leg derives it; no header, no notes.
pub fn project(headers: &HeaderMap) -> Result<Option<ProjectId>, ApiError> {
    agent::project_from(
        header_str(headers, "x-relay-project"),
        [
            header_str(headers, "x-relay-git-remote"),
            header_str(headers, "x-relay-cwd"),
        ]
        .into_iter()
        .flatten(),
    )
}

/// Validates the translated request as a leg, then puts back the caller's tools unchanged (the
/// catalogue's role gating is for Relay's own agents) and the project from the headers.
pub fn leg(
    request: &AgentRequest,
    tools: &[ToolDef],
    headers: &HeaderMap,
) -> Result<agent::ValidLeg, ApiError> {
    let mut leg = agent::validate(request)?;
    leg.tools = tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.clone(),
        })
        .collect();
    leg.project_id = project(headers)?;
    Ok(leg)
}

/// The client's own body and headers, kept for a provider of the same API family.
pub fn passthrough(
    family: Family,
    body: &[u8],
    headers: &HeaderMap,
) -> Result<Option<Arc<Passthrough>>, ApiError> {
    let body: serde_json::Map<String, serde_json::Value> = crate::http::extract::parse_json(body)?;
    Ok(Some(Arc::new(Passthrough {
        family,
        body,
        anthropic_beta: header_str(headers, "anthropic-beta").map(str::to_owned),
    })))
}

/// Runs the leg up to its first output (fail early as HTTP, like a leg).
pub async fn open(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    model: &str,
    leg: agent::ValidLeg,
    arrived: Instant,
) -> Result<Opened, ApiError> {
    let request_id = crate::http::extract::request_id(headers);
    agent::open_leg(state, caller, request_id, Some(model), leg, arrived).await
}

/// Adds the notes receipt to an answer.
fn with_receipt(mut response: Response, note_ids: &[String]) -> Response {
    if let Ok(v) = HeaderValue::from_str(&note_ids.join(",")) {
        response.headers_mut().insert(NOTE_IDS, v);
    }
    response
}

/// A `text/event-stream` answer from already encoded events.
fn sse(events: BoxStream<'static, Bytes>) -> Response {
    let body = events.map(Ok::<Bytes, std::convert::Infallible>);
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Seconds since the epoch, for the `created` fields.
pub fn now_secs() -> i64 {
    crate::clock::now() as i64
}
