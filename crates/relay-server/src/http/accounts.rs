//! Accounts and sessions: signup, signin, signout and `GET /v1/me` (spec §2.3, §2.4, §4.1, §5).

pub mod lockout;
mod session;

use axum::extract::State;
use axum::http::HeaderMap;
use relay_wire::account::{Credentials, Me, Session};
use relay_wire::{ErrorBody, ErrorCode, OkResponse};

pub use session::start_session;

use crate::accounts::{Caller, LOCAL_USER, bearer_token, new_token, new_user_id, token_hash};
use crate::config::SignupMode;
use crate::domain::{Email, Password, Role};
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{ClientAddr, Json};
use crate::http::state::AppState;
use crate::store::{NewUser, StoreError};

fn parse_credentials(body: &Credentials) -> ApiResult<(Email, Password)> {
    let email = Email::parse(&body.email).map_err(ApiError::invalid)?;
    let password = Password::parse(&body.password).map_err(ApiError::invalid)?;
    Ok((email, password))
}

/// Open mode: an unchanged client signs in and gets a token that is accepted and ignored.
fn open_mode_session(email: &Email) -> Session {
    Session {
        token: new_token(),
        email: email.to_string(),
        role: LOCAL_USER.into(),
        limit: -1,
    }
}

/// Create an account and sign it in.
#[utoipa::path(post, path = "/v1/auth/signup", tag = "accounts",
    request_body = Credentials,
    responses(
        (status = 200, description = "Account created; a session for it", body = Session),
        (status = 400, description = "Email or password breaks the rules", body = ErrorBody),
        (status = 403, description = "`signup_closed`", body = ErrorBody),
        (status = 409, description = "`email_taken`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: too many signups from this address in an hour, or too many passwords being checked at once; see Retry-After", body = ErrorBody),
    ))]
pub async fn signup(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    Json(body): Json<Credentials>,
) -> ApiResult<axum::Json<Session>> {
    let (email, password) = parse_credentials(&body)?;
    let (Some(auth), Some(auth_config)) = (state.auth(), state.config().auth.as_ref()) else {
        return Ok(axum::Json(open_mode_session(&email)));
    };
    if auth_config.signup == SignupMode::Closed {
        return Err(ApiError::new(
            ErrorCode::SignupClosed,
            "signups are closed on this server",
        ));
    }
    // Each signup costs a hash: an address gets `signups_per_hour` of them.
    if let Some(ip) = client {
        state.limits().signup.check(&ip.to_string()).await?;
    }
    let password_hash = state.passwords().hash(password.expose()).await?;
    let new = NewUser {
        id: new_user_id(),
        email: email.clone(),
        password_hash,
        role: Role::User,
        limit: auth_config.default_limit,
        created_at: crate::clock::now(),
    };
    let user = match auth.create_user(new).await {
        Ok(user) => user,
        Err(StoreError::Conflict(_)) => {
            return Err(ApiError::new(
                ErrorCode::EmailTaken,
                "an account with this email already exists",
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let session = start_session(&state, &user).await?;
    Ok(axum::Json(session))
}

/// Sign in with email and password.
#[utoipa::path(post, path = "/v1/auth/signin", tag = "accounts",
    request_body = Credentials,
    responses(
        (status = 200, description = "A new session", body = Session),
        (status = 400, description = "Email or password breaks the rules", body = ErrorBody),
        (status = 401, description = "`invalid_credentials`: unknown email or wrong password alike", body = ErrorBody),
        (status = 429, description = "`rate_limited`: too many failed signins for this email or address, or too many passwords being checked at once; see Retry-After", body = ErrorBody),
    ))]
pub async fn signin(
    State(state): State<AppState>,
    ClientAddr(peer): ClientAddr,
    Json(body): Json<Credentials>,
) -> ApiResult<axum::Json<Session>> {
    let (email, password) = parse_credentials(&body)?;
    let Some(auth) = state.auth() else {
        return Ok(axum::Json(open_mode_session(&email)));
    };
    // The failure is counted before the password is checked, so concurrent guesses cannot all
    // slip in under the budget; a right password gives its place back.
    let reservation = lockout::reserve(&state, auth.as_ref(), &email, peer).await?;
    let checked = match auth.user_by_email(email.as_str()).await {
        Ok(found) => {
            let stored = found.as_ref().map(|(_, hash)| hash.as_str());
            state
                .passwords()
                .verify(password.expose(), stored)
                .await
                .map(|ok| found.filter(|_| ok))
        }
        Err(e) => Err(e.into()),
    };
    match checked {
        Ok(Some((user, _))) => {
            reservation.release().await;
            Ok(axum::Json(start_session(&state, &user).await?))
        }
        Ok(None) => Err(ApiError::new(
            ErrorCode::InvalidCredentials,
            "email or password is wrong",
        )),
        // No password was checked (store down, hashing busy): not a failure.
        Err(e) => {
            reservation.release().await;
            Err(e)
        }
    }
}

/// Invalidate the presented token. Always `{ok: true}`.
#[utoipa::path(post, path = "/v1/auth/signout", tag = "accounts",
    security((), ("bearer" = [])),
    responses((status = 200, description = "The token no longer works", body = OkResponse)))]
pub async fn signout(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> ApiResult<axum::Json<OkResponse>> {
    if let (Some(auth), Some(token)) = (state.auth(), bearer_token(&headers)) {
        auth.delete_session(&token_hash(token)).await?;
    }
    Ok(axum::Json(OkResponse::yes()))
}

/// The caller's account and quota.
#[utoipa::path(get, path = "/v1/me", tag = "accounts",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Account snapshot; `auth: false` in open mode", body = Me),
    ))]
pub async fn get_me(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> ApiResult<axum::Json<Me>> {
    // A new month sets last month's counts back first (`[auth] quota_period = "month"`).
    state.roll_quota().await?;
    // `used` moves with every leg: the account is read from the store, never the session cache.
    let caller = Caller::from_token_fresh(&state, bearer_token(&headers)).await?;
    let now = state.clock().now();
    let tokens_resets_at = Some(crate::usage::period::rfc3339(
        crate::usage::period::next_month_start(crate::clock::now() as i64),
    ));
    let budget = crate::usage::budget::of(
        state.ledger().store().as_ref(),
        state.budget_defaults(),
        caller.user_id(),
    )
    .await?;
    Ok(axum::Json(match caller {
        Caller::Local => Me {
            auth: false,
            role: LOCAL_USER.into(),
            email: String::new(),
            limit: -1,
            used: state.memory().open_legs().await?,
            remaining: -1,
            token_budget: budget.token_budget,
            tokens_used: budget.tokens_used,
            tokens_remaining: budget.remaining(),
            quota_period: "never".into(),
            quota_resets_at: None,
            tokens_resets_at,
            spend_budget_usd: budget.spend_budget_usd,
            spend_used_usd: budget.spend_used_usd,
            allowed_models: None,
        },
        Caller::User(user) => Me {
            auth: true,
            role: user.role.as_str().into(),
            email: user.email.clone(),
            limit: user.effective_limit(),
            used: user.used,
            remaining: user.remaining(),
            token_budget: budget.token_budget,
            tokens_used: budget.tokens_used,
            tokens_remaining: budget.remaining(),
            quota_period: state.quota_month().period().as_str().into(),
            quota_resets_at: state.quota_month().resets_at(now),
            tokens_resets_at,
            spend_budget_usd: budget.spend_budget_usd,
            spend_used_usd: budget.spend_used_usd,
            allowed_models: user.allowed_models.clone(),
        },
    }))
}
