//! `GET /api/oauth/usage`: the bearer's spend and caps in the shape Claude Code reads from a
//! gateway it signed in to (the path claude.ai serves it on), so `/usage` and the status line
//! show dollars beside the percent the Messages headers give (issue 40).

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use relay_wire::ErrorBody;

use crate::accounts::Caller;
use crate::accounts::token::bearer_token;
use crate::error::ApiResult;
use crate::http::compat::errors::{Api, respond};
use crate::http::state::AppState;
use crate::store::usage::{GroupBy, UsageQuery};

/// The caller's spend this month, and its caps with their standing.
#[utoipa::path(get, path = "/api/oauth/usage", tag = "sign-in",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{extra_usage: {is_enabled, monthly_limit, used_credits, utilization, currency}, limits: [{kind, group, percent, resets_at, severity, is_active}]}`: amounts in cents, percents whole; `monthly_limit` is the spend budget (null without one); one `limits` row per cap (`units`, `tokens`, `spend`), each `resets_at` the instant of the Messages door's `anthropic-ratelimit-unified-reset`; without any cap `limits` is empty and `extra_usage` adds `daily` and `weekly` spend. `Cache-Control: no-store`",
            example = json!({"extra_usage": {"is_enabled": true, "monthly_limit": 50_000, "used_credits": 27_140, "utilization": 54, "currency": "USD"},
                "limits": [{"kind": "spend", "group": "monthly", "percent": 54, "resets_at": "2026-12-01T00:00:00.000Z", "severity": "normal", "is_active": true}]})),
        (status = 401, description = "`authentication_error` (Anthropic's shape), `x-should-retry: false`", body = crate::http::compat::anthropic::AnthropicErrorBody),
        (status = 404, description = "Open mode: no accounts, no caps", body = ErrorBody),
    ))]
pub async fn get_usage(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let caller = match Caller::from_token_fresh(&state, bearer_token(&headers)).await {
        Ok(c) => c,
        Err(e) => return respond(Api::Anthropic, e),
    };
    match usage(&state, &caller).await {
        Ok(mut response) => {
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(e) => e.into_response(),
    }
}

async fn usage(state: &AppState, caller: &Caller) -> ApiResult<Response> {
    let Caller::User(user) = caller else {
        return Err(super::open_mode_404());
    };
    // One read of the budgets serves both the caps and the month's spend.
    let budget = crate::usage::budget::of(
        state.ledger().store().as_ref(),
        state.budget_defaults(),
        &user.id,
    )
    .await?;
    let caps = crate::http::compat::limits::caps(state, caller, Some(budget))
        .await
        .unwrap_or_default();
    let (day, week) = recent_spend(state, &user.id).await?;
    let body = caps.usage_body((budget.spend_used_usd, day, week));
    Ok(axum::Json(body).into_response())
}

/// The account's spend today and this week (from Monday, UTC), from the daily roll-up.
async fn recent_spend(state: &AppState, user_id: &str) -> ApiResult<(f64, f64)> {
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let now = crate::clock::now() as i64;
    let today = now.div_euclid(86_400);
    // 1970-01-01 was a Thursday: day 0 is 3 days after a Monday.
    let monday = today - (today + 3).rem_euclid(7);
    let days = state
        .ledger()
        .store()
        .aggregate(&UsageQuery {
            user_id: Some(user_id.to_owned()),
            from: monday * 86_400,
            to: now,
            group_by: GroupBy::Day,
        })
        .await?;
    let mut day = 0.0;
    let mut week = 0.0;
    for row in days {
        let cost = row.cost_usd.unwrap_or(0.0);
        week += cost;
        if row.key.as_deref() == Some(today.to_string().as_str()) {
            day += cost;
        }
    }
    Ok((day, week))
}
