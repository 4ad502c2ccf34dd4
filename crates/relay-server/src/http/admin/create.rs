//! `POST /v1/admin/users`: an admin creates an account, as `relay users add` does, with its role,
//! limit and token budget in one call; and the email search of `GET /v1/admin/users?q=`.

use axum::extract::State;
use relay_wire::ErrorBody;
use relay_wire::admin::{NewAccount, UserResult};

use super::admin_store;
use crate::accounts::Caller;
use crate::domain::{Email, Password, Role};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::Json;
use crate::http::state::AppState;
use crate::operator;
use crate::store::{AuthStore, StoreResult, User};

/// Create an account with its role, limit and token budget (admins only), as `relay users add` does.
#[utoipa::path(post, path = "/v1/admin/users", tag = "accounts",
    security(("bearer" = [])),
    request_body = NewAccount,
    responses(
        (status = 200, description = "The new account", body = UserResult,
            example = json!({"ok": true, "user": {"id": "u_9b2e4d6f80a1c3e5", "email": "bob@example.com", "role": "user", "limit": 500, "used": 0, "remaining": 500, "created_at": 1_763_900_500.0}})),
        (status = 400, description = "A bad email, password (8 to 256 characters), role, limit or token budget (named)", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: open mode has no accounts", body = ErrorBody),
        (status = 409, description = "`email_taken`: an account with this email exists", body = ErrorBody),
    ))]
pub async fn create_user(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<NewAccount>,
) -> ApiResult<axum::Json<UserResult>> {
    let auth = admin_store(&state, &caller)?;
    // Everything is checked before the account exists, so a bad budget leaves nothing behind.
    let email = Email::parse(&body.email).map_err(ApiError::invalid)?;
    let password = Password::parse(&body.password).map_err(ApiError::invalid)?;
    let role = body
        .role
        .as_deref()
        .map(Role::parse)
        .transpose()
        .map_err(ApiError::invalid)?
        .unwrap_or(Role::User);
    let limit = operator::check_limit(body.limit)?;
    if let Some(n) = body.token_budget
        && n < -1
    {
        return Err(ApiError::invalid(format!(
            "token_budget must be -1 (unlimited) or a count of tokens, not {n}"
        )));
    }
    let (Some(auth), Some(config)) = (auth, state.config().auth.as_ref()) else {
        return Err(ApiError::not_found(
            "open mode has no accounts: add an [auth] table to create them",
        ));
    };
    let limit = limit.unwrap_or(config.default_limit);
    let user = operator::create_account(
        auth.as_ref(),
        state.passwords(),
        email,
        &password,
        role,
        limit,
    )
    .await?;
    if let Some(n) = body.token_budget {
        operator::set_token_budget(state.ledger().store().as_ref(), &user, n).await?;
    }
    Ok(axum::Json(UserResult {
        ok: true,
        user: user.into(),
    }))
}

/// The accounts whose email contains `q` (any case), oldest first, and how many there are. It reads
/// every account, as the last-admin check does: admin listings are small and rare.
pub async fn search(
    auth: &dyn AuthStore,
    q: &str,
    limit: u32,
    offset: u64,
) -> StoreResult<(u64, Vec<User>)> {
    let q = q.to_lowercase();
    let mut users = auth.list_users().await?;
    users.retain(|u| u.email.to_lowercase().contains(&q));
    users.sort_by(|a, b| {
        a.created_at
            .total_cmp(&b.created_at)
            .then_with(|| a.email.cmp(&b.email))
    });
    let total = users.len() as u64;
    let page = users
        .into_iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(limit as usize)
        .collect();
    Ok((total, page))
}
