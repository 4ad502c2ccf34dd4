//! A sign-in's place in the failure budgets (`limits::signin`), with the refusal saying how long
//! to wait, and an operator's lifting of an email's lock honoured on every instance (issue 42).

use std::net::IpAddr;

use relay_wire::ErrorCode;

use crate::domain::Email;
use crate::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::limits::signin::Reservation;
use crate::store::AuthStore;

/// Reserves the sign-in's place for `email` and the client address. A lock an operator lifted
/// since (`relay users unlock`, `DELETE /v1/admin/users/{email}/lock`, recorded in the store)
/// forgets the failures before it, then the place is asked for again.
pub async fn reserve<'a>(
    state: &'a AppState,
    auth: &dyn AuthStore,
    email: &Email,
    peer: Option<IpAddr>,
) -> ApiResult<Reservation<'a>> {
    let email_key = format!("email:{email}");
    let address_key = peer.map(|ip| format!("addr:{ip}"));
    let throttle = state.signin_throttle();
    let first = throttle
        .reserve_signin(&email_key, address_key.as_deref())
        .await;
    let wait = match first {
        Ok(held) => return Ok(held),
        Err(wait) => wait,
    };
    // Only a refused sign-in reads the store: a lifted lock is rare, failures are not.
    if let Ok(Some(lifted)) = auth.signin_unlocked_at(email.as_str()).await {
        throttle.forgive(&email_key, lifted).await;
        // What is left once the lock is lifted (the address's delay at most) is the wait to name.
        return throttle
            .reserve_signin(&email_key, address_key.as_deref())
            .await
            .map_err(refused);
    }
    Err(refused(wait))
}

/// 429 with `Retry-After` and the seconds in the message, which `relay login` prints.
pub fn refused(wait_secs: u64) -> ApiError {
    ApiError::new(
        ErrorCode::RateLimited,
        format!(
            "too many failed sign-ins for this email or from this address: try again in {wait_secs} seconds \
             (an admin can lift an email's lock with `relay users unlock EMAIL`)"
        ),
    )
    .with_retry_after(wait_secs)
}
