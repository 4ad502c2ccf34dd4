//! The one error type handlers return, rendered as `{error, message}` with the code's status.
//!
//! 5xx details are logged here, once, and never put in a body. [`Shaped`] is the same error for
//! the memory handlers, whose 503 carries their success shape emptied.

use std::borrow::Cow;
use std::marker::PhantomData;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use relay_wire::emptied::Emptied;
use relay_wire::{ErrorBody, ErrorCode};
use serde::Serialize;

use crate::store::StoreError;

#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: Cow<'static, str>,
    retry_after: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn unauthorized() -> Self {
        Self::new(
            ErrorCode::Unauthorized,
            "a valid token is required: send Authorization: Bearer <token> from /v1/auth/signin",
        )
    }

    pub fn not_found(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Self::new(
            ErrorCode::RateLimited,
            "too many requests; retry after the time in Retry-After",
        )
        .with_retry_after(retry_after_secs)
    }

    /// An unexpected failure: the detail goes to the log, the client gets a generic message.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(
            ErrorCode::Internal,
            "internal error; the request id identifies it in the logs",
        )
    }

    pub fn store_unavailable(detail: impl std::fmt::Display) -> Self {
        tracing::warn!(error = %detail, "store unavailable");
        Self::new(
            ErrorCode::StoreUnavailable,
            "the store is unavailable; retry shortly",
        )
    }

    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs.max(1));
        self
    }

    /// Seconds for `Retry-After`, when the error carries one.
    pub fn retry_after(&self) -> Option<u64> {
        self.retry_after
    }

    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(detail) => Self::store_unavailable(detail),
            StoreError::Conflict(what) => Self::internal(format!("unexpected conflict: {what}")),
            StoreError::Unstorable(detail) => {
                tracing::debug!(%detail, "the store refused a value");
                Self::invalid("the text holds a character that cannot be stored (a NUL?)")
            }
            StoreError::Internal(detail) => Self::internal(detail),
        }
    }
}

impl ApiError {
    /// The response with `body` in place of `{error, message}`; status and headers are the error's.
    fn respond_with(self, body: impl Serialize) -> Response {
        let status = self.status();
        let mut response = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            // RFC 6750 §3: a 401 names the scheme that would be accepted.
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.code,
            message: self.message.to_string(),
        };
        self.respond_with(body)
    }
}

/// An [`ApiError`] of a handler whose 503 `store_unavailable` answers with the emptied success
/// shape `S` (spec §4.4 rule 4); every other error renders as usual. Handlers use plain `?`.
#[derive(Debug)]
pub struct Shaped<S>(ApiError, PhantomData<fn() -> S>);

impl<S> From<ApiError> for Shaped<S> {
    fn from(e: ApiError) -> Self {
        Self(e, PhantomData)
    }
}

impl<S> From<StoreError> for Shaped<S> {
    fn from(e: StoreError) -> Self {
        ApiError::from(e).into()
    }
}

impl<S: Emptied> IntoResponse for Shaped<S> {
    fn into_response(self) -> Response {
        let Self(e, _) = self;
        if e.code == ErrorCode::StoreUnavailable {
            let body = S::emptied(e.code, e.message.to_string());
            e.respond_with(body)
        } else {
            e.into_response()
        }
    }
}

/// The code a bare status stands for, when something outside our handlers produced it.
pub fn code_for_status(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        400 | 422 => ErrorCode::InvalidRequest,
        401 => ErrorCode::Unauthorized,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        413 => ErrorCode::PayloadTooLarge,
        415 => ErrorCode::UnsupportedMediaType,
        429 => ErrorCode::RateLimited,
        502 => ErrorCode::UpstreamError,
        503 => ErrorCode::StoreUnavailable,
        _ => ErrorCode::Internal,
    }
}
