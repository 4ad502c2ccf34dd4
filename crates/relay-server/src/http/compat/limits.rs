//! The usage limits an agent shows, on the Messages door only (issue 40): the
//! `anthropic-ratelimit-unified-*` headers of each answer for an account with a cap, and the 429
//! `billing_error` once a cap is reached (other routes keep their codes).

use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use relay_wire::ErrorCode;
use serde_json::json;

use crate::accounts::Caller;
use crate::error::ApiError;
use crate::http::state::AppState;
use crate::usage::budget::Budget;
use crate::usage::caps::Caps;
use crate::usage::period::next_month_start;

/// Whether `e` is a cap that was reached: the unit quota or a monthly budget.
pub fn is_cap(e: &ApiError) -> bool {
    matches!(e.code, ErrorCode::QuotaExceeded | ErrorCode::BudgetExceeded)
}

/// The caller's caps: its units as the store has them now (this leg's unit counted) and its
/// budgets as admission read them (`budget`, read again when not given). `None` in open mode.
pub async fn caps(state: &AppState, caller: &Caller, budget: Option<Budget>) -> Option<Caps> {
    let Caller::User(user) = caller else {
        return None;
    };
    let mut user = user.clone();
    if !user.unlimited()
        && let Some(auth) = state.auth()
        && let Ok(Some((fresh, _))) = auth.user_by_email(&user.email).await
    {
        user = fresh;
    }
    let budget = match budget {
        Some(b) => b,
        None => crate::usage::budget::of(
            state.ledger().store().as_ref(),
            state.budget_defaults(),
            &user.id,
        )
        .await
        .ok()?,
    };
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let now = state.clock().now() as i64;
    let month_end = next_month_start(now);
    let units_reset =
        (state.quota_month().period() == crate::config::QuotaPeriod::Month).then_some(month_end);
    Some(Caps::of(&user, &budget, month_end, units_reset))
}

/// Adds the caller's standing to a successful answer.
pub fn with_headers(mut response: Response, caps: Option<&Caps>) -> Response {
    if let Some(caps) = caps {
        insert(&mut response, caps.headers());
    }
    response
}

/// A reached cap on the Messages door: 429 `billing_error` with the seconds to the reset in
/// `retry-after`, `x-should-retry: false` and the rejected headers, and Relay's own sentence
/// (what ran out, when it resets, whom to ask) as the message Claude Code prints.
pub async fn billing(state: &AppState, caller: Option<&Caller>, e: ApiError) -> Response {
    let caps = match caller {
        Some(caller) => caps(state, caller, None).await.unwrap_or_default(),
        None => Caps::default(),
    };
    let body = json!({"type": "error", "error": {"type": "billing_error", "message": e.message}});
    let mut response =
        (axum::http::StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let now = state.clock().now() as i64;
    if let Some(at) = caps.rejected_reset() {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from((at - now).max(1).unsigned_abs()),
        );
    }
    response
        .headers_mut()
        .insert("x-should-retry", HeaderValue::from_static("false"));
    insert(&mut response, caps.rejected_headers());
    response
}

fn insert(response: &mut Response, headers: Vec<(&'static str, String)>) {
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(HeaderName::from_static(name), value);
        }
    }
}
