//! `GET /v1/usage`, `GET /v1/usage/legs` and `GET /v1/admin/usage`: the ledger read back, summed
//! per UTC day, model, project or (admins) account, and page by page.

use axum::extract::State;
use relay_wire::{ErrorBody, ErrorCode};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::accounts::Caller;
use crate::domain::Role;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::Query;
use crate::http::state::AppState;
use crate::store::usage::{
    GroupBy, StoredLeg, UsageQuery, UsageSums, civil_from_days, days_from_civil,
};

/// Days covered when `from` is not given: the last 30, today included.
const DEFAULT_DAYS: i64 = 30;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageParams {
    /// First UTC day, `YYYY-MM-DD`, included; default 29 days before `to`.
    pub from: Option<String>,
    /// Last UTC day, `YYYY-MM-DD`, included; default today.
    pub to: Option<String>,
    /// `day` (default), `model` or `project`; on `/v1/admin/usage` also `user`.
    pub group_by: Option<String>,
}

/// The sums of one key, or of the whole range.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageRow {
    /// The day (`YYYY-MM-DD`), model, project (null: legs without one) or account email.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable)]
    pub key: Option<Option<String>>,
    pub legs: i64,
    /// Every prompt token, cached ones included.
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub cache_write_tokens: i64,
    pub output_tokens: i64,
    /// USD; null when no leg in the row was of a priced model.
    pub cost_usd: Option<f64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UsageReport {
    pub from: String,
    pub to: String,
    pub group_by: String,
    /// Ordered by key.
    pub rows: Vec<UsageRow>,
    pub totals: UsageRow,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LegsParams {
    /// At most 200; default 50.
    pub limit: Option<String>,
    /// `next` of the previous page (of the same filters).
    pub cursor: Option<String>,
    /// Only records of this configured model; empty is no filter.
    pub model: Option<String>,
    /// Only `ok`, `error` or `cancelled` records; empty is no filter.
    pub status: Option<String>,
    /// Only records of this project; empty is no filter.
    pub project_id: Option<String>,
}

/// One leg as the ledger keeps it.
#[derive(Debug, Serialize, ToSchema)]
pub struct LegItem {
    pub request_id: String,
    /// Unix seconds.
    pub at: i64,
    /// `agent`, `chat_completions`, `messages` or `responses`.
    pub route: String,
    pub model: String,
    pub provider: String,
    pub project_id: Option<String>,
    /// `ok`, `error` or `cancelled`.
    pub status: String,
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub cache_write_tokens: i64,
    pub output_tokens: i64,
    pub reasoning_tokens: i64,
    pub ttfb_ms: i64,
    pub duration_ms: i64,
    pub cost_usd: Option<f64>,
    /// The tokens are Relay's estimate: the provider's own count never arrived (the client left
    /// early, or the call failed after output).
    pub estimated: bool,
    /// Tools the provider ran itself for the call (web searches, fetches, code runs), which it
    /// bills apart from tokens.
    pub server_tool_uses: i64,
    /// The account's email: only on `/v1/admin/usage/legs` (open mode's caller is `local`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LegPage {
    /// Newest first.
    pub items: Vec<LegItem>,
    /// The cursor of the next page; null on the last.
    pub next: Option<String>,
}

/// The caller's usage summed per UTC day, model or project.
#[utoipa::path(get, path = "/v1/usage", tag = "usage",
    security(("bearer" = [])),
    params(UsageParams),
    responses(
        (status = 200, description = "Rows ordered by key, and the totals", body = UsageReport),
        (status = 400, description = "A bad `from`, `to` or `group_by` (named)", body = ErrorBody),
    ))]
pub async fn get_usage(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<UsageParams>,
) -> ApiResult<axum::Json<UsageReport>> {
    report(&state, Some(caller.user_id().to_owned()), &params, false).await
}

/// Every account's usage; `group_by=user` keys rows by email. Admins only.
#[utoipa::path(get, path = "/v1/admin/usage", tag = "usage",
    security(("bearer" = [])),
    params(UsageParams),
    responses(
        (status = 200, description = "Rows ordered by key, and the totals", body = UsageReport),
        (status = 400, description = "A bad `from`, `to` or `group_by` (named)", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
    ))]
pub async fn get_admin_usage(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<UsageParams>,
) -> ApiResult<axum::Json<UsageReport>> {
    if let Caller::User(u) = &caller
        && u.role != Role::Admin
    {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only an admin may see every account's usage",
        ));
    }
    report(&state, None, &params, true).await
}

/// The caller's legs, newest first, optionally of one model, status or project.
#[utoipa::path(get, path = "/v1/usage/legs", tag = "usage",
    security(("bearer" = [])),
    params(LegsParams),
    responses(
        (status = 200, description = "One page of records, newest first", body = LegPage),
        (status = 400, description = "A bad `limit`, `cursor` or `status` (named)", body = ErrorBody),
    ))]
pub async fn get_usage_legs(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<LegsParams>,
) -> ApiResult<axum::Json<LegPage>> {
    let filter = super::usage_legs::filter(
        Some(caller.user_id().to_owned()),
        &params.model,
        &params.status,
        &params.project_id,
    )?;
    super::usage_legs::page(&state, &filter, &params.limit, &params.cursor, None).await
}

/// Cursors are opaque to clients: `l` and the last id in hexadecimal.
pub(super) fn encode_cursor(id: i64) -> String {
    format!("l{id:x}")
}

pub(super) fn decode_cursor(c: &str) -> Option<i64> {
    i64::from_str_radix(c.strip_prefix('l')?, 16)
        .ok()
        .filter(|n| *n > 0)
}

pub(super) fn item(l: StoredLeg) -> LegItem {
    let r = l.record;
    LegItem {
        request_id: r.request_id,
        at: r.at,
        route: r.route.as_str().to_owned(),
        model: r.model,
        provider: r.provider,
        project_id: r.project_id,
        status: r.status.to_owned(),
        input_tokens: r.input_tokens,
        cached_input_tokens: r.cached_input_tokens,
        cache_write_tokens: r.cache_write_tokens,
        output_tokens: r.output_tokens,
        reasoning_tokens: r.reasoning_tokens,
        ttfb_ms: r.ttfb_ms,
        duration_ms: r.duration_ms,
        cost_usd: r.cost_usd,
        estimated: r.estimated,
        server_tool_uses: r.server_tool_uses,
        email: None,
    }
}

/// A `YYYY-MM-DD` date as a day number; `None` when it is not one.
fn parse_day(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (
        s[..4].parse::<i64>().ok()?,
        s[5..7].parse::<i64>().ok()?,
        s[8..].parse::<i64>().ok()?,
    );
    let day = days_from_civil(y, m, d);
    // A date that does not exist (02-30) comes back as another one.
    (civil_from_days(day) == (y, m, d)).then_some(day)
}

fn format_day(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

async fn report(
    state: &AppState,
    user_id: Option<String>,
    params: &UsageParams,
    admin: bool,
) -> ApiResult<axum::Json<UsageReport>> {
    let day = |key: &str, v: &Option<String>| -> ApiResult<Option<i64>> {
        v.as_deref()
            .map(|s| {
                parse_day(s).ok_or_else(|| {
                    ApiError::invalid(format!("{key} must be a date like 2026-11-26 (YYYY-MM-DD)"))
                })
            })
            .transpose()
    };
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let today = (crate::clock::now() as i64).div_euclid(86_400);
    let to = day("to", &params.to)?.unwrap_or(today);
    let from = day("from", &params.from)?.unwrap_or(to - (DEFAULT_DAYS - 1));
    if from > to {
        return Err(ApiError::invalid("from must not be after to"));
    }
    let group_by = match params.group_by.as_deref().unwrap_or("day") {
        "day" => GroupBy::Day,
        "model" => GroupBy::Model,
        "project" => GroupBy::Project,
        "user" if admin => GroupBy::User,
        _ => {
            return Err(ApiError::invalid(if admin {
                "group_by must be day, model, project or user"
            } else {
                "group_by must be day, model or project"
            }));
        }
    };
    let query = UsageQuery {
        user_id,
        from: from * 86_400,
        to: to * 86_400 + 86_399,
        group_by,
    };
    let sums = state.ledger().store().aggregate(&query).await?;
    let emails = if group_by == GroupBy::User {
        emails(state).await?
    } else {
        Default::default()
    };
    let mut rows: Vec<UsageRow> = sums
        .into_iter()
        .map(|s| {
            let key = s.key.clone().map(|k| match group_by {
                GroupBy::Day => k.parse::<i64>().map_or(k, format_day),
                GroupBy::User => emails.get(&k).cloned().unwrap_or(k),
                GroupBy::Model | GroupBy::Project => k,
            });
            row(Some(key), &s)
        })
        .collect();
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    let totals = rows
        .iter()
        .fold(row(None, &UsageSums::default()), |mut t, r| {
            // Saturating: every row is held below 2^63 by the store, their sum is too.
            t.legs = t.legs.saturating_add(r.legs);
            t.input_tokens = t.input_tokens.saturating_add(r.input_tokens);
            t.cached_input_tokens = t.cached_input_tokens.saturating_add(r.cached_input_tokens);
            t.cache_write_tokens = t.cache_write_tokens.saturating_add(r.cache_write_tokens);
            t.output_tokens = t.output_tokens.saturating_add(r.output_tokens);
            t.cost_usd = match (t.cost_usd, r.cost_usd) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
            };
            t
        });
    Ok(axum::Json(UsageReport {
        from: format_day(from),
        to: format_day(to),
        group_by: params.group_by.clone().unwrap_or_else(|| "day".into()),
        rows,
        totals,
    }))
}

fn row(key: Option<Option<String>>, s: &UsageSums) -> UsageRow {
    UsageRow {
        key,
        legs: s.legs,
        input_tokens: s.input_tokens,
        cached_input_tokens: s.cached_input_tokens,
        cache_write_tokens: s.cache_write_tokens,
        output_tokens: s.output_tokens,
        cost_usd: s.cost_usd,
    }
}

/// Account ids to emails; open mode's `local` keeps its id.
pub(super) async fn emails(
    state: &AppState,
) -> ApiResult<std::collections::HashMap<String, String>> {
    Ok(match state.auth() {
        Some(auth) => auth
            .list_users()
            .await?
            .into_iter()
            .map(|u| (u.id, u.email))
            .collect(),
        None => Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_parse_strictly_and_cursors_round_trip() {
        assert_eq!(parse_day("1970-01-02"), Some(1));
        assert_eq!(format_day(parse_day("2026-11-26").unwrap()), "2026-11-26");
        for bad in ["2026-02-30", "2026-1-01", "26-11-2026", "", "2026-11-26T00"] {
            assert_eq!(parse_day(bad), None, "{bad}");
        }
        assert_eq!(decode_cursor(&encode_cursor(12_345)), Some(12_345));
        assert_eq!(decode_cursor("12345"), None);
    }
}
