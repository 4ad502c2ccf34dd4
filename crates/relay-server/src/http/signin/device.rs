//! The verification page at `/device` and the two calls it makes: look up a pending code, and
//! approve or deny it for the signed-in account.
//!
//! The page is the console's kind: embedded HTML under the console's Content-Security-Policy, a
//! Bearer token from `/v1/auth/signin` in the tab's sessionStorage, JSON bodies only. A page on
//! another site can neither read the token nor send a JSON body without a CORS preflight, which
//! Relay does not grant it: the guard's rule for every other console call keeps cross-site posts
//! out here too. Codes that fail are counted per client address in the signin throttle, so the
//! 34 bits of a user code cannot be searched from one address.

use axum::extract::{Path, State};
use axum::response::Response;
use relay_wire::ErrorBody;
use relay_wire::signin::{DeviceDecision, DeviceRequest};

use super::open_mode_404;
use crate::accounts::Caller;
use crate::accounts::device::normalize_user_code;
use crate::error::{ApiError, ApiResult};
use crate::http::console::{CONSOLE_CSP, embedded};
use crate::http::extract::{ClientAddr, Json};
use crate::http::state::AppState;
use crate::store::User;
use crate::store::signin::SignInStore;

const PAGE: &str = include_str!("../../../assets/console/device.html");

/// The page where a person approves an agent's sign-in.
#[utoipa::path(get, path = "/device", tag = "sign-in",
    params(("user_code" = Option<String>, Query, description = "The code the terminal shows; pre-filled, never approved without a click", example = "WDJB-MJHT")),
    responses(
        (status = 200, description = "The verification page (sign in, check the code, Approve or Deny), under the console's Content-Security-Policy", content_type = "text/html", body = String),
        (status = 404, description = "`not_found`: open mode", body = ErrorBody),
    ))]
pub async fn get_device_page(State(state): State<AppState>) -> Result<Response, ApiError> {
    if state.signin().is_none() {
        return Err(open_mode_404());
    }
    Ok(embedded("text/html; charset=utf-8", PAGE, CONSOLE_CSP))
}

/// The signed-in account and the sign-in store, or why not.
fn signed_in(
    state: &AppState,
    caller: Caller,
) -> ApiResult<(User, &std::sync::Arc<dyn SignInStore>)> {
    let store = state.signin().ok_or_else(open_mode_404)?;
    match caller {
        Caller::User(user) => Ok((user, store)),
        Caller::Local => Err(open_mode_404()),
    }
}

/// Finds the pending code, counting a miss against the client's address.
async fn pending(
    state: &AppState,
    store: &dyn SignInStore,
    client: Option<std::net::IpAddr>,
    typed: &str,
) -> ApiResult<String> {
    let key = vec![format!(
        "device:addr:{}",
        client.map_or_else(String::new, |ip| ip.to_string())
    )];
    // The miss is counted before the lookup, so that guesses in parallel cannot slip past the
    // budget; a code that is found gives its place back.
    let reservation = state
        .signin_throttle()
        .reserve(&key)
        .await
        .map_err(ApiError::rate_limited)?;
    let now = crate::clock::now();
    let found = match normalize_user_code(typed) {
        Some(code) => store.pending_device(&code, now).await,
        None => Ok(None),
    };
    match found {
        Ok(Some(device)) => {
            reservation.release().await;
            Ok(device.user_code)
        }
        Ok(None) => Err(ApiError::not_found(
            "no pending sign-in has this code: it is mistyped, used or expired",
        )),
        Err(e) => {
            reservation.release().await;
            Err(e.into())
        }
    }
}

/// A pending sign-in, as the page shows it before the user decides.
#[utoipa::path(get, path = "/v1/device/{user_code}", tag = "sign-in",
    security(("bearer" = [])),
    params(("user_code" = String, Path, description = "As the terminal shows it; case, spaces and dashes do not matter", example = "WDJB-MJHT")),
    responses(
        (status = 200, description = "The code, the client that asked and how long it stays valid", body = DeviceRequest),
        (status = 404, description = "`not_found`: no pending sign-in has this code (or open mode)", body = ErrorBody),
        (status = 429, description = "`rate_limited`: too many unknown codes from this address; see Retry-After", body = ErrorBody),
    ))]
pub async fn get_device(
    State(state): State<AppState>,
    caller: Caller,
    ClientAddr(client): ClientAddr,
    Path(user_code): Path<String>,
) -> ApiResult<axum::Json<DeviceRequest>> {
    let (_, store) = signed_in(&state, caller)?;
    let code = pending(&state, store.as_ref(), client, &user_code).await?;
    let now = crate::clock::now();
    let device = store
        .pending_device(&code, now)
        .await?
        .ok_or_else(|| ApiError::not_found("the code expired"))?;
    Ok(axum::Json(DeviceRequest {
        user_code: device.user_code,
        surface: device.surface,
        user_agent: device.user_agent,
        expires_in: (device.expires_at - now).max(0.0) as u64,
    }))
}

/// Approve or deny a pending sign-in for the caller's account.
#[utoipa::path(post, path = "/v1/device/{user_code}", tag = "sign-in",
    security(("bearer" = [])),
    params(("user_code" = String, Path, description = "As the terminal shows it", example = "WDJB-MJHT")),
    request_body = DeviceDecision,
    responses(
        (status = 200, description = "Decided: the agent's next poll gets its tokens (or `access_denied`)", body = relay_wire::OkResponse),
        (status = 404, description = "`not_found`: no pending sign-in has this code (or open mode)", body = ErrorBody),
        (status = 429, description = "`rate_limited`: too many unknown codes from this address", body = ErrorBody),
    ))]
pub async fn decide_device(
    State(state): State<AppState>,
    caller: Caller,
    ClientAddr(client): ClientAddr,
    Path(user_code): Path<String>,
    Json(decision): Json<DeviceDecision>,
) -> ApiResult<axum::Json<relay_wire::OkResponse>> {
    let (user, store) = signed_in(&state, caller)?;
    let code = pending(&state, store.as_ref(), client, &user_code).await?;
    let approver = decision.approve.then_some(user.id.as_str());
    if !store
        .decide_device(&code, approver, crate::clock::now())
        .await?
    {
        return Err(ApiError::not_found(
            "the code expired or was decided meanwhile",
        ));
    }
    Ok(axum::Json(relay_wire::OkResponse::yes()))
}
