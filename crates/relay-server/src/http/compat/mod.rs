//! The compatible endpoints: OpenAI Chat Completions and Responses, Anthropic Messages and the
//! models list, so tools and SDKs that speak those APIs can point their base URL at Relay.
//!
//! Each request is translated into a leg (`legs::validate_door`) and run through the leg machinery
//! (`Legs::open`: model routing with fallback, rate limit, quota, note injection) by one
//! sequence, `door::serve`; only the translation of the request and the encoding of the answer
//! and of the errors are each API's own (a `door::Door`).

pub mod anthropic;
pub mod count_tokens;
pub mod doc;
pub mod door;
pub mod errors;
pub mod limits;
pub mod models;
pub mod openai;
pub mod responses;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use futures::stream::BoxStream;
use relay_wire::ErrorCode;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::accounts::Caller;
use crate::domain::{Door, ProjectId};
use crate::error::ApiError;
use crate::http::state::AppState;
use crate::legs::{self, Opened};
use crate::policy;
use crate::providers::passthrough::{Passthrough, RawBody};
use crate::providers::registry::ModelEntry;
pub use errors::Api;

/// Bodies may be as large as a leg's (long conversations).
pub const BODY_LIMIT: usize = legs::BODY_LIMIT;

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
    legs::project_from(
        header_str(headers, "x-relay-project"),
        [
            header_str(headers, "x-relay-git-remote"),
            header_str(headers, "x-relay-cwd"),
        ]
        .into_iter()
        .flatten(),
    )
}

/// Reads a request body whole, within `[server] body_timeout_ms` and `BODY_LIMIT`: a slow or
/// endless upload is cut off instead of holding memory and a connection.
pub async fn read_body(state: &AppState, body: Body) -> Result<Bytes, ApiError> {
    let deadline = Duration::from_millis(state.config().server.body_timeout_ms);
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, BODY_LIMIT)).await {
        Err(_) => Err(ApiError::new(
            ErrorCode::RequestTimeout,
            format!(
                "the request body did not arrive within {} ms",
                deadline.as_millis()
            ),
        )),
        Ok(Err(e)) if is_too_large(&e) => Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body is larger than {BODY_LIMIT} bytes"),
        )),
        Ok(Err(_)) => Err(ApiError::invalid("the request body could not be read")),
        Ok(Ok(bytes)) => Ok(bytes),
    }
}

fn is_too_large(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// The door's request type read from the parsed body (the body is parsed once, as a map).
pub fn from_map<T: DeserializeOwned>(client: &Map<String, Value>) -> Result<T, ApiError> {
    let value = || {
        serde::de::value::MapDeserializer::<_, serde_json::Error>::new(
            client.iter().map(|(k, v)| (k.as_str(), v)),
        )
    };
    // Read without tracking the path first (as `extract::parse_json`); a request that fails
    // is read again for the message.
    if let Ok(request) = T::deserialize(value()) {
        return Ok(request);
    }
    let value = value();
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        ApiError::invalid(if path == "." {
            inner.to_string()
        } else {
            format!("{inner} at `{path}`")
        })
    })
}

/// A prompt's size in tokens before the provider counts it: about four bytes a token of the body
/// (an overestimate, as JSON's syntax counts too), for budget reservations.
pub fn prompt_estimate(body_bytes: usize) -> u64 {
    (body_bytes as u64).div_ceil(4)
}

/// The models a call for `model` may reach; empty for an unknown model (the leg names it).
pub fn chain(state: &AppState, model: Option<&str>) -> Vec<Arc<ModelEntry>> {
    model
        .and_then(|m| state.models().resolve(Some(m)))
        .unwrap_or_default()
}

/// The pass-through policy on the client's body: search tools that are not allowed left out,
/// anything else the models may not be asked refused (a 400 naming the field), and Relay's own
/// values in the fields it owns.
pub async fn apply_policy(
    state: &AppState,
    caller: &Caller,
    door: Door,
    client: &mut Map<String, Value>,
    bytes: &mut RawBody,
    chain: policy::Chain<'_>,
) -> Result<(), ApiError> {
    let removed = policy::strip_unallowed_search(door, client, chain);
    if !removed.is_empty() {
        tracing::info!(tools = ?removed, "hosted search tools left out: not allowed for the model");
        bytes.forget("tools");
        bytes.forget("web_search_options");
    }
    policy::check(door, client, chain)?;
    policy::rewrite(door, client, &state.identity(caller.user_id()).await?);
    for field in policy::REWRITTEN {
        bytes.forget(field);
    }
    Ok(())
}

/// The client's own body and `anthropic-beta` (filtered to the allowed betas), kept for a
/// provider of the same API family, which streams its own events to a client that streams.
pub fn passthrough(
    state: &AppState,
    door: Door,
    body: Map<String, Value>,
    bytes: RawBody,
    headers: &HeaderMap,
    chain: policy::Chain<'_>,
    stream: bool,
) -> Arc<Passthrough> {
    let anthropic_beta = header_str(headers, "anthropic-beta").and_then(|header| {
        let (kept, dropped) =
            policy::betas(header, &state.config().routing.anthropic_betas, chain);
        if !dropped.is_empty() {
            tracing::info!(betas = ?dropped, "anthropic-beta values dropped: not on the allowed list");
        }
        kept
    });
    Arc::new(Passthrough {
        door,
        body,
        bytes,
        anthropic_beta,
        raw: stream,
    })
}

/// Runs the leg up to its first output (fail early as HTTP, like a leg).
pub async fn open(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    model: &str,
    leg: legs::ValidLeg,
    arrived: Instant,
) -> Result<Opened, ApiError> {
    let request_id = crate::http::extract::request_id(headers);
    state
        .legs()
        .open(caller, request_id, Some(model), leg, arrived)
        .await
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
