//! Session creation: a fresh token for an account, its hash stored with the configured lifetime.

use relay_wire::account::Session;

use crate::accounts::token::{new_token, token_hash};
use crate::error::ApiError;
use crate::http::state::AppState;
use crate::store::User;

/// Issues a token for `user` and stores its hash.
pub async fn start_session(state: &AppState, user: &User) -> Result<Session, ApiError> {
    let auth = state
        .auth()
        .ok_or_else(|| ApiError::internal("session without an auth store"))?;
    let ttl_days = state
        .config()
        .auth
        .as_ref()
        .map_or(30, |a| a.token_ttl_days);
    let token = new_token();
    let now = crate::clock::now();
    auth.create_session(
        &token_hash(&token),
        &user.id,
        now,
        now + f64::from(ttl_days) * 86_400.0,
    )
    .await?;
    Ok(Session {
        token,
        email: user.email.clone(),
        role: user.role.as_str().into(),
        limit: user.effective_limit(),
    })
}
