//! Command suggestions: history first (as fish and zsh-autosuggestions do), the model second, and a
//! fail-closed safety check on the full completed line either way.
//!
//! A terminal calls this on a debounced keystroke: it must be fast, costs no quota, and never
//! proposes something harmful. Partials and history are never logged; secrets in history are
//! redacted before anything reaches a provider.

mod history;
mod model;

use axum::extract::State;
use relay_safety as safety;
use relay_wire::ErrorBody;
use relay_wire::suggest::{SuggestRequest, SuggestResponse};

use crate::accounts::Caller;
use crate::error::ApiResult;
use crate::http::extract::Json;
use crate::http::state::AppState;

/// The longest line Relay will suggest, in bytes.
pub const MAX_SUGGESTION_BYTES: usize = 1_000;

/// How many of the newest `recent` lines are considered.
const MAX_RECENT: usize = 200;

/// Suggest one completed command line.
#[utoipa::path(post, path = "/v1/suggest", tag = "suggest",
    security(("bearer" = [])),
    request_body = SuggestRequest,
    responses(
        (status = 200, description = "`suggestion` strictly extends `partial`, or is null (under 2 characters, nothing confident, or unsafe)", body = SuggestResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 429, description = "`rate_limited`", body = ErrorBody),
    ))]
pub async fn suggest(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<SuggestRequest>,
) -> ApiResult<axum::Json<SuggestResponse>> {
    state.limits().suggest.check(caller.user_id()).await?;
    let none = axum::Json(SuggestResponse { suggestion: None });
    if body.partial.chars().count() < 2 || body.partial.len() > MAX_SUGGESTION_BYTES {
        return Ok(none);
    }
    let skip = body.recent.len().saturating_sub(MAX_RECENT);
    let recent = &body.recent[skip..];
    if let Some(line) = history::complete(&body.partial, recent) {
        return Ok(axum::Json(SuggestResponse {
            suggestion: Some(line),
        }));
    }
    let Some(entry) = state.models().suggest() else {
        return Ok(none);
    };
    let deadline = std::time::Duration::from_millis(state.config().routing.suggest_deadline_ms);
    let suggestion = model::complete(entry, &body.partial, &body.cwd, recent, deadline).await;
    Ok(axum::Json(SuggestResponse { suggestion }))
}

/// Whether `line` may be sent as a suggestion for `partial`: one line, no control characters,
/// bounded, strictly extending, and safe.
fn acceptable(partial: &str, line: &str) -> bool {
    line.len() <= MAX_SUGGESTION_BYTES
        && !line.chars().any(char::is_control)
        && safety::check_completion(partial, line) == safety::Verdict::Allow
}
