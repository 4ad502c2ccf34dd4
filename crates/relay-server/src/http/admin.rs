//! Account administration over HTTP for operators (role `admin`): `GET /v1/admin/users`,
//! `PATCH` and `DELETE /v1/admin/users/{email}`, and lifting a sign-in lock.
//!
//! Each does what `relay users list|set|delete` does, through the same functions in `operator`, so
//! the CLI and the console cannot drift apart. Anyone else gets 403 `forbidden`; in open mode there
//! are no accounts, so the list is empty and every email is unknown.

use axum::extract::{Path, State};
use relay_wire::ErrorCode;
use relay_wire::admin::{AdminUser, UserList, UserListQuery, UserPatch, UserResult};
use relay_wire::signin::SignedOut;
use relay_wire::{ErrorBody, OkResponse};

use crate::accounts::Caller;
use crate::domain::Role;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{Json, Query};
use crate::http::state::AppState;
use crate::operator::{self, OperatorError};
use crate::store::{AuthStore, User};

pub mod create;

/// `limit` of the listing when none is given, and the most it returns.
const LIST_DEFAULT: i64 = 50;
const LIST_MAX: i64 = 200;

impl From<User> for AdminUser {
    fn from(u: User) -> Self {
        Self {
            limit: u.effective_limit(),
            remaining: u.remaining(),
            role: u.role.as_str().into(),
            id: u.id,
            email: u.email,
            used: u.used,
            created_at: u.created_at,
            // Filled in from the account's standing where an answer shows it (`operator::Standing`).
            quota_period: String::new(),
            quota_resets_at: None,
            token_budget: -1,
            tokens_used: 0,
            tokens_resets_at: None,
            spend_budget_usd: -1.0,
            spend_used_usd: 0.0,
            allowed_models: u.allowed_models,
        }
    }
}

impl From<operator::Standing> for AdminUser {
    fn from(s: operator::Standing) -> Self {
        Self {
            quota_period: s.quota_period.as_str().into(),
            quota_resets_at: s.quota_resets_at,
            token_budget: s.token_budget,
            tokens_used: s.tokens_used,
            tokens_resets_at: Some(s.tokens_resets_at),
            spend_budget_usd: s.spend_budget_usd,
            spend_used_usd: s.spend_used_usd,
            ..s.user.into()
        }
    }
}

impl From<OperatorError> for ApiError {
    fn from(e: OperatorError) -> Self {
        match e {
            OperatorError::Invalid(m) => ApiError::invalid(m),
            OperatorError::NoSuchUser(_) | OperatorError::NoAuth => {
                ApiError::not_found("no account with this email")
            }
            OperatorError::Exists(_) => ApiError::new(
                ErrorCode::EmailTaken,
                "an account with this email already exists",
            ),
            e @ OperatorError::LastAdmin(_) => ApiError::new(ErrorCode::LastAdmin, e.to_string()),
            OperatorError::Store(e) => e.into(),
            OperatorError::Other(e) => ApiError::internal(e),
        }
    }
}

/// The auth store when the caller is an admin; `None` in open mode (no accounts); 403 otherwise.
pub(crate) fn admin_store(
    state: &AppState,
    caller: &Caller,
) -> ApiResult<Option<std::sync::Arc<dyn AuthStore>>> {
    match caller {
        Caller::Local => Ok(None),
        Caller::User(u) if u.role == Role::Admin => Ok(state.auth().cloned()),
        Caller::User(_) => Err(ApiError::new(
            ErrorCode::Forbidden,
            "only an admin may manage accounts",
        )),
    }
}

/// A page of accounts, oldest first, optionally those whose email contains `q` (admins only).
#[utoipa::path(get, path = "/v1/admin/users", tag = "accounts",
    security(("bearer" = [])),
    params(UserListQuery),
    responses(
        (status = 200, description = "Oldest account first; empty in open mode", body = UserList,
            example = json!({"total": 2, "items": [
                {"id": "u_3f9a1c0d2b7e8f41", "email": "ada@example.com", "role": "admin", "limit": -1, "used": 40, "remaining": -1, "created_at": 1_763_900_000.0},
                {"id": "u_9b2e4d6f80a1c3e5", "email": "bob@example.com", "role": "user", "limit": 100, "used": 12, "remaining": 88, "created_at": 1_763_900_500.0}]})),
        (status = 400, description = "Negative limit or offset", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
    ))]
pub async fn list_users(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<UserListQuery>,
) -> ApiResult<axum::Json<UserList>> {
    let auth = admin_store(&state, &caller)?;
    let limit = query.limit.unwrap_or(LIST_DEFAULT);
    let offset = query.offset.unwrap_or(0);
    if limit < 0 || offset < 0 {
        return Err(ApiError::invalid("limit and offset must not be negative"));
    }
    let Some(auth) = auth else {
        return Ok(axum::Json(UserList {
            total: 0,
            items: Vec::new(),
        }));
    };
    state.roll_quota().await?;
    let limit = u32::try_from(limit.min(LIST_MAX)).unwrap_or(0);
    let (total, users) = match query.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        None => auth.list_users_page(limit, offset.unsigned_abs()).await?,
        Some(q) => create::search(auth.as_ref(), q, limit, offset.unsigned_abs()).await?,
    };
    let now = state.clock().now();
    let mut items = Vec::with_capacity(users.len());
    for user in users {
        let standing = operator::standing(
            state.ledger().store().as_ref(),
            state.budget_defaults(),
            state.quota_month(),
            user,
            now,
        )
        .await?;
        items.push(AdminUser::from(standing));
    }
    Ok(axum::Json(UserList { total, items }))
}

/// Lift an account's sign-in lock (admins only), as `relay users unlock` does: the failures
/// before now stop counting on every instance; the client address's own slow-down stays.
#[utoipa::path(delete, path = "/v1/admin/users/{email}/lock", tag = "accounts",
    security(("bearer" = [])),
    params(("email" = String, Path, description = "The account's email", example = "bob@example.com")),
    responses(
        (status = 200, description = "The account signs in again at once", body = OkResponse),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: no account with this email", body = ErrorBody),
    ))]
pub async fn delete_user_lock(
    State(state): State<AppState>,
    caller: Caller,
    Path(email): Path<String>,
) -> ApiResult<axum::Json<OkResponse>> {
    let auth = admin_store(&state, &caller)?.ok_or(OperatorError::NoAuth)?;
    operator::unlock_user(auth.as_ref(), &email).await?;
    Ok(axum::Json(OkResponse::yes()))
}

/// Change an account's role, limit, budgets or models, or reset its usage (admins only), as
/// `relay users set` does.
#[utoipa::path(patch, path = "/v1/admin/users/{email}", tag = "accounts",
    security(("bearer" = [])),
    params(("email" = String, Path, description = "The account's email", example = "bob@example.com")),
    request_body = UserPatch,
    responses(
        (status = 200, description = "The account after the change", body = UserResult,
            example = json!({"ok": true, "user": {"id": "u_9b2e4d6f80a1c3e5", "email": "bob@example.com", "role": "user", "limit": 500, "used": 0, "remaining": 500, "created_at": 1_763_900_500.0}})),
        (status = 400, description = "An unknown role, a limit or budget below -1, or a model that is not configured", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: no account with this email", body = ErrorBody),
        (status = 409, description = "`last_admin`: the change would demote the only admin", body = ErrorBody),
    ))]
pub async fn patch_user(
    State(state): State<AppState>,
    caller: Caller,
    Path(email): Path<String>,
    Json(patch): Json<UserPatch>,
) -> ApiResult<axum::Json<UserResult>> {
    let auth = admin_store(&state, &caller)?;
    let mut changes = operator::parse_changes(
        patch.role.as_deref(),
        patch.limit,
        patch.reset_usage.unwrap_or(false),
    )?;
    if let Some(n) = patch.token_budget
        && n < -1
    {
        return Err(ApiError::invalid(format!(
            "token_budget must be -1 (unlimited) or a count of tokens, not {n}"
        )));
    }
    if let Some(usd) = patch.spend_budget_usd
        && (!usd.is_finite() || (usd < 0.0 && usd != -1.0))
    {
        return Err(ApiError::invalid(format!(
            "spend_budget_usd must be -1 (unlimited) or an amount in USD, not {usd}"
        )));
    }
    if let Some(models) = patch.allowed_models {
        changes.allowed_models = Some(operator::check_models(
            models,
            &state.legs().models().names(),
        )?);
    }
    let auth = auth.ok_or(OperatorError::NoAuth)?;
    if changes.role == Some(Role::User) {
        operator::keep_an_admin(auth.as_ref(), &email).await?;
    }
    let user = operator::set_user(auth.as_ref(), &email, changes).await?;
    if let Some(n) = patch.token_budget {
        operator::set_token_budget(state.ledger().store().as_ref(), &user, n).await?;
    }
    if let Some(usd) = patch.spend_budget_usd {
        operator::set_spend_budget(state.ledger().store().as_ref(), &user, usd).await?;
    }
    let standing = operator::standing(
        state.ledger().store().as_ref(),
        state.budget_defaults(),
        state.quota_month(),
        user,
        state.clock().now(),
    )
    .await?;
    Ok(axum::Json(UserResult {
        ok: true,
        user: standing.into(),
    }))
}

/// End every session and refresh token of an account (admins only), as `relay users signout` does.
#[utoipa::path(delete, path = "/v1/admin/users/{email}/sessions", tag = "accounts",
    security(("bearer" = [])),
    params(("email" = String, Path, description = "The account's email", example = "bob@example.com")),
    responses(
        (status = 200, description = "Every session and refresh token of the account is revoked (its API keys stay): its agents must sign in again", body = SignedOut,
            example = json!({"ok": true, "revoked": 3})),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: no account with this email", body = ErrorBody),
    ))]
pub async fn delete_user_sessions(
    State(state): State<AppState>,
    caller: Caller,
    Path(email): Path<String>,
) -> ApiResult<axum::Json<SignedOut>> {
    let auth = admin_store(&state, &caller)?.ok_or(OperatorError::NoAuth)?;
    let signin = state.signin().ok_or(OperatorError::NoAuth)?;
    let revoked = operator::signout_user(auth.as_ref(), signin.as_ref(), &email).await?;
    Ok(axum::Json(SignedOut { ok: true, revoked }))
}

/// Delete an account, its sessions and every note it stored (admins only), as `relay users delete` does.
#[utoipa::path(delete, path = "/v1/admin/users/{email}", tag = "accounts",
    security(("bearer" = [])),
    params(("email" = String, Path, description = "The account's email", example = "bob@example.com")),
    responses(
        (status = 200, description = "The account as it was before it went", body = UserResult,
            example = json!({"ok": true, "user": {"id": "u_9b2e4d6f80a1c3e5", "email": "bob@example.com", "role": "user", "limit": 100, "used": 12, "remaining": 88, "created_at": 1_763_900_500.0}})),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: no account with this email", body = ErrorBody),
        (status = 409, description = "`last_admin`: the account is the only admin", body = ErrorBody),
    ))]
pub async fn delete_user(
    State(state): State<AppState>,
    caller: Caller,
    Path(email): Path<String>,
) -> ApiResult<axum::Json<UserResult>> {
    let auth = admin_store(&state, &caller)?.ok_or(OperatorError::NoAuth)?;
    operator::keep_an_admin(auth.as_ref(), &email).await?;
    let user = operator::delete_user(
        auth.as_ref(),
        state.memory().as_ref(),
        state.ledger().store().as_ref(),
        &email,
    )
    .await?;
    Ok(axum::Json(UserResult {
        ok: true,
        user: user.into(),
    }))
}
