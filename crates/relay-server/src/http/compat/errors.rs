//! Relay's errors in the shapes OpenAI's and Anthropic's APIs use, so each SDK raises its own
//! typed exception (statuses stay Relay's: 403 for an exhausted quota, never a retried 429).

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use relay_wire::ErrorCode;
use serde_json::{Value, json};

use crate::domain::Door;
use crate::error::ApiError;

/// Which API's shapes an answer takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

impl Api {
    /// The shape a door's errors take: Anthropic's on the Messages door, OpenAI's on the others
    /// (the native route answers in Relay's own and never asks).
    pub const fn of(door: Door) -> Self {
        match door {
            Door::Messages => Self::Anthropic,
            Door::Agent | Door::ChatCompletions | Door::Responses => Self::OpenAi,
        }
    }
}

/// The error `type` each API names a status with.
fn error_type(api: Api, status: u16) -> &'static str {
    match (api, status) {
        (_, 400 | 422) => "invalid_request_error",
        (_, 401) => "authentication_error",
        (_, 403) => "permission_error",
        (_, 404) => "not_found_error",
        (Api::OpenAi, 413) => "invalid_request_error",
        (Api::Anthropic, 413) => "request_too_large",
        (_, 429) => "rate_limit_error",
        (Api::Anthropic, 503) => "overloaded_error",
        (_, _) => "api_error",
    }
}

/// The status an error has on a compatible door: Relay's, except that a model the account may
/// not use is a malformed request there (400 `invalid_request_error`, as the APIs name a model
/// a key may not use), where the native route says 403 `model_not_allowed`.
pub fn status_of(code: ErrorCode) -> u16 {
    match code {
        ErrorCode::ModelNotAllowed => 400,
        code => code.status(),
    }
}

/// The JSON body of an error in `api`'s shape.
pub fn body(api: Api, code: ErrorCode, message: &str) -> Value {
    let kind = error_type(api, status_of(code));
    match api {
        Api::OpenAi => json!({"error": {
            "message": message,
            "type": kind,
            "param": null,
            "code": code.as_str(),
        }}),
        Api::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
    }
}

/// What Claude Code shows when its sign-in no longer works (it prints the gateway's message).
const SIGN_IN_AGAIN: &str = "your Relay sign-in has expired or was revoked: run /login to sign in again (or send a current API key)";

/// An `ApiError` answered in `api`'s shape, with Relay's status and `Retry-After`.
pub fn respond(api: Api, e: ApiError) -> Response {
    let status = axum::http::StatusCode::from_u16(status_of(e.code)).unwrap_or(e.status());
    // A 401 on the Anthropic shape stops Claude Code at once (`x-should-retry: false`) and says
    // how to get back in, rather than letting it retry for minutes with a dead token.
    let sign_in_again = api == Api::Anthropic && e.code == ErrorCode::Unauthorized;
    let message = if sign_in_again {
        SIGN_IN_AGAIN
    } else {
        &e.message
    };
    let mut response = (status, axum::Json(body(api, e.code, message))).into_response();
    if sign_in_again {
        response
            .headers_mut()
            .insert("x-should-retry", HeaderValue::from_static("false"));
    }
    if let Some(secs) = e.retry_after() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}
