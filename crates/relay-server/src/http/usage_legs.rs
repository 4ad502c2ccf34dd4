//! Pages of the usage ledger's records: the caller's (`GET /v1/usage/legs`) and, for admins, every
//! account's (`GET /v1/admin/usage/legs`), each narrowed by model, status and project; the
//! console's Requests view reads them.

use axum::extract::State;
use relay_wire::{ErrorBody, ErrorCode};
use serde::Deserialize;
use utoipa::IntoParams;

use super::usage::{LegPage, decode_cursor, emails, encode_cursor, item};
use crate::accounts::Caller;
use crate::domain::Role;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::Query;
use crate::http::state::AppState;
use crate::store::usage::LegFilter;

const LEGS_DEFAULT: u32 = 50;
const LEGS_MAX: u32 = 200;
const STATUSES: [&str; 3] = ["ok", "error", "cancelled"];

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AdminLegsParams {
    /// At most 200; default 50.
    pub limit: Option<String>,
    /// `next` of the previous page (of the same filters).
    pub cursor: Option<String>,
    /// Only this account's records (its email); empty is every account.
    pub user: Option<String>,
    /// Only records of this configured model; empty is no filter.
    pub model: Option<String>,
    /// Only `ok`, `error` or `cancelled` records; empty is no filter.
    pub status: Option<String>,
    /// Only records of this project; empty is no filter.
    pub project_id: Option<String>,
}

/// A filter from query values: an empty one is no filter (as an HTML form sends it), a status
/// must be one a record can have.
pub fn filter(
    user_id: Option<String>,
    model: &Option<String>,
    status: &Option<String>,
    project_id: &Option<String>,
) -> ApiResult<LegFilter> {
    let given = |v: &Option<String>| v.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
    let status = given(status);
    if let Some(s) = &status
        && !STATUSES.contains(&s.as_str())
    {
        return Err(ApiError::invalid("status must be ok, error or cancelled"));
    }
    Ok(LegFilter {
        user_id,
        model: given(model),
        status,
        project_id: given(project_id),
    })
}

/// One page of the records the filter covers, newest first; with `emails`, each item names its
/// account.
pub async fn page(
    state: &AppState,
    filter: &LegFilter,
    limit: &Option<String>,
    cursor: &Option<String>,
    emails: Option<&std::collections::HashMap<String, String>>,
) -> ApiResult<axum::Json<LegPage>> {
    let limit = match limit.as_deref() {
        None => LEGS_DEFAULT,
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=LEGS_MAX).contains(n))
            .ok_or_else(|| ApiError::invalid("limit must be a whole number from 1 to 200"))?,
    };
    let before = match cursor.as_deref() {
        None => None,
        Some(c) => Some(decode_cursor(c).ok_or_else(|| {
            ApiError::invalid("cursor is not one this endpoint gave; use `next` of a page")
        })?),
    };
    let mut legs = state
        .ledger()
        .store()
        .legs(filter, before, limit + 1)
        .await?;
    let more = legs.len() > limit as usize;
    legs.truncate(limit as usize);
    let next = more
        .then(|| legs.last().map(|l| encode_cursor(l.id)))
        .flatten();
    let items = legs
        .into_iter()
        .map(|l| {
            let email = emails.map(|m| {
                m.get(&l.record.user_id)
                    .cloned()
                    .unwrap_or_else(|| l.record.user_id.clone())
            });
            let mut i = item(l);
            i.email = email;
            i
        })
        .collect();
    Ok(axum::Json(LegPage { items, next }))
}

/// Every account's legs, newest first, optionally of one account, model, status or project, each
/// with its account's email. Admins only.
#[utoipa::path(get, path = "/v1/admin/usage/legs", tag = "usage",
    security(("bearer" = [])),
    params(AdminLegsParams),
    responses(
        (status = 200, description = "One page of records, newest first, each with `email`", body = LegPage),
        (status = 400, description = "A bad `limit`, `cursor` or `status` (named)", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: no account has the `user` email", body = ErrorBody),
    ))]
pub async fn get_admin_usage_legs(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<AdminLegsParams>,
) -> ApiResult<axum::Json<LegPage>> {
    if let Caller::User(u) = &caller
        && u.role != Role::Admin
    {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only an admin may see every account's records",
        ));
    }
    let emails = emails(&state).await?;
    let user_id = match params.user.as_deref().filter(|u| !u.is_empty()) {
        None => None,
        // Open mode has one caller, `local`, and no emails.
        Some(email) if state.auth().is_none() => Some(email.to_owned()),
        Some(email) => Some(
            emails
                .iter()
                .find(|(_, e)| e.eq_ignore_ascii_case(email))
                .map(|(id, _)| id.clone())
                .ok_or_else(|| ApiError::not_found("no account with this email"))?,
        ),
    };
    let filter = filter(user_id, &params.model, &params.status, &params.project_id)?;
    page(
        &state,
        &filter,
        &params.limit,
        &params.cursor,
        Some(&emails),
    )
    .await
}
