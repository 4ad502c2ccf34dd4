//! The waitlist (newsletter signup): stored, idempotent, and silent about who is already on it.

use axum::extract::State;
use relay_wire::account::WaitlistRequest;
use relay_wire::{ErrorBody, OkResponse};

use crate::domain::Email;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::Json;
use crate::http::state::AppState;

/// Join the waitlist. A repeated email answers the same as a new one.
#[utoipa::path(post, path = "/v1/waitlist", tag = "accounts",
    request_body = WaitlistRequest,
    responses(
        (status = 200, description = "Stored (or already there)", body = OkResponse),
        (status = 400, description = "Invalid email or source", body = ErrorBody),
    ))]
pub async fn join_waitlist(
    State(state): State<AppState>,
    Json(body): Json<WaitlistRequest>,
) -> ApiResult<axum::Json<OkResponse>> {
    let email = Email::parse(&body.email).map_err(ApiError::invalid)?;
    let source = body
        .source
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("web");
    if source.chars().count() > 64 {
        return Err(ApiError::invalid("source is longer than 64 characters"));
    }
    if source.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "source may not contain control characters",
        ));
    }
    // The waitlist lives in the auth store when there is one, else beside the notes.
    state
        .waitlist_store()
        .add_to_waitlist(email.as_str(), source, crate::clock::now())
        .await?;
    Ok(axum::Json(OkResponse::yes()))
}
