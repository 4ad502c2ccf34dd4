//! API keys for scripts, CI and agents that do not sign in: `POST/GET /v1/keys`,
//! `DELETE /v1/keys/{id}`, and for admins everybody's (`/v1/admin/keys`).
//!
//! A key is a Relay token of its owner's (`rlk_…`, a `sessions` row with no short expiry): it is
//! stored as its SHA-256 only, shown once, and every leg it runs counts against the owner's
//! quota and budgets, as the owner's own token would.

use axum::extract::{Path, State};
use relay_wire::signin::{CreatedKey, KeyInfo, KeyList, NewKey};
use relay_wire::{ErrorBody, ErrorCode, OkResponse};

use crate::accounts::Caller;
use crate::accounts::device::{key_prefix, new_api_key, new_id};
use crate::accounts::token_hash;
use crate::domain::Role;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::Json;
use crate::http::state::AppState;
use crate::store::User;
use crate::store::signin::{ApiKey, NewApiKey, SignInStore};

/// The most keys one account may hold.
const MAX_KEYS: usize = 50;

impl From<ApiKey> for KeyInfo {
    fn from(k: ApiKey) -> Self {
        Self {
            id: k.id,
            name: k.name,
            prefix: k.prefix,
            email: k.email,
            created_at: k.created_at,
            last_used_at: k.last_used_at,
            expires_at: k.expires_at,
        }
    }
}

/// The signed-in account and the store of keys; 404 in open mode, where there are no accounts.
fn owner(state: &AppState, caller: Caller) -> ApiResult<(User, &std::sync::Arc<dyn SignInStore>)> {
    match (caller, state.signin()) {
        (Caller::User(user), Some(store)) => Ok((user, store)),
        _ => Err(ApiError::not_found(
            "API keys need accounts: add an [auth] table to Relay's configuration",
        )),
    }
}

fn admin(state: &AppState, caller: Caller) -> ApiResult<&std::sync::Arc<dyn SignInStore>> {
    let (user, store) = owner(state, caller)?;
    if user.role != Role::Admin {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only an admin may manage other accounts' keys",
        ));
    }
    Ok(store)
}

/// Create an API key for the caller's account; the key is in this answer only.
#[utoipa::path(post, path = "/v1/keys", tag = "sign-in",
    security(("bearer" = [])),
    request_body = NewKey,
    responses(
        (status = 200, description = "The key, shown this once, and its record", body = CreatedKey),
        (status = 400, description = "A name that is empty, too long or has control characters; `expires_in_days` out of 1..3650; more than 50 keys", body = ErrorBody),
        (status = 404, description = "`not_found`: open mode", body = ErrorBody),
    ))]
pub async fn create_key(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<NewKey>,
) -> ApiResult<axum::Json<CreatedKey>> {
    let (user, store) = owner(&state, caller)?;
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "name must be 1 to 64 characters without control characters",
        ));
    }
    if let Some(days) = body.expires_in_days
        && !(1..=3650).contains(&days)
    {
        return Err(ApiError::invalid("expires_in_days must be from 1 to 3650"));
    }
    if store.list_api_keys(Some(&user.id)).await?.len() >= MAX_KEYS {
        return Err(ApiError::invalid(
            "this account holds 50 keys already: revoke one first",
        ));
    }
    let key = new_api_key();
    let now = crate::clock::now();
    let new = NewApiKey {
        id: new_id("k_"),
        user_id: user.id.clone(),
        name: name.to_owned(),
        prefix: key_prefix(&key),
        token_hash: token_hash(&key),
        created_at: now,
        expires_at: body.expires_in_days.map(|d| now + f64::from(d) * 86_400.0),
    };
    store.create_api_key(&new).await?;
    Ok(axum::Json(CreatedKey {
        key,
        info: KeyInfo {
            id: new.id,
            name: new.name,
            prefix: new.prefix,
            email: user.email,
            created_at: now,
            last_used_at: None,
            expires_at: new.expires_at,
        },
    }))
}

/// The caller's API keys, newest first (never the keys themselves).
#[utoipa::path(get, path = "/v1/keys", tag = "sign-in",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Name, prefix, created, last used and expiry of each key", body = KeyList),
        (status = 404, description = "`not_found`: open mode", body = ErrorBody),
    ))]
pub async fn list_keys(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<axum::Json<KeyList>> {
    let (user, store) = owner(&state, caller)?;
    let keys = store.list_api_keys(Some(&user.id)).await?;
    Ok(axum::Json(KeyList {
        keys: keys.into_iter().map(KeyInfo::from).collect(),
    }))
}

/// Revoke one of the caller's API keys; it stops working at once.
#[utoipa::path(delete, path = "/v1/keys/{id}", tag = "sign-in",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The key's id", example = "k_3f9a1c0d2b7e8f41")),
    responses(
        (status = 200, description = "Revoked", body = OkResponse),
        (status = 404, description = "`not_found`: the caller has no key with this id (or open mode)", body = ErrorBody),
    ))]
pub async fn revoke_key(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<OkResponse>> {
    let (user, store) = owner(&state, caller)?;
    if !store.revoke_api_key(&id, Some(&user.id)).await? {
        return Err(ApiError::not_found("you have no key with this id"));
    }
    Ok(axum::Json(OkResponse::yes()))
}

/// Every account's API keys, newest first (admins only).
#[utoipa::path(get, path = "/v1/admin/keys", tag = "sign-in",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every key, with its owner's email", body = KeyList),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: open mode", body = ErrorBody),
    ))]
pub async fn admin_list_keys(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<axum::Json<KeyList>> {
    let store = admin(&state, caller)?;
    let keys = store.list_api_keys(None).await?;
    Ok(axum::Json(KeyList {
        keys: keys.into_iter().map(KeyInfo::from).collect(),
    }))
}

/// Revoke anyone's API key (admins only).
#[utoipa::path(delete, path = "/v1/admin/keys/{id}", tag = "sign-in",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The key's id", example = "k_3f9a1c0d2b7e8f41")),
    responses(
        (status = 200, description = "Revoked", body = OkResponse),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: no key with this id (or open mode)", body = ErrorBody),
    ))]
pub async fn admin_revoke_key(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<OkResponse>> {
    let store = admin(&state, caller)?;
    if !store.revoke_api_key(&id, None).await? {
        return Err(ApiError::not_found("no key with this id"));
    }
    Ok(axum::Json(OkResponse::yes()))
}

/// Records when a key was last used: one read per request made with a key, and at most one write
/// a minute per key. A failure here never fails the request.
pub async fn touch(state: &AppState, token: &str) {
    if !token.starts_with("rlk_") {
        return;
    }
    let Some(store) = state.signin() else {
        return;
    };
    if let Err(e) = store
        .touch_api_key(&token_hash(token), crate::clock::now())
        .await
    {
        tracing::debug!(error = %e, "could not record a key's use");
    }
}
