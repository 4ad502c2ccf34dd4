//! The OAuth endpoints of agents' sign-in: discovery, device authorization, token, revocation.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use relay_wire::signin::{
    AuthServerMetadata, DeviceAuthorization, DeviceAuthorizationForm, OAuthError, RevokeForm,
    TokenForm, TokenResponse,
};
use serde::de::DeserializeOwned;

use super::{DEVICE_GRANT, INTERVAL_SECS, base_url, open_mode_404};
use crate::accounts::device::{new_device_code, new_id, new_refresh_token, new_user_code};
use crate::accounts::{new_token, token_hash};
use crate::config::AuthConfig;
use crate::error::ApiError;
use crate::http::extract::ClientAddr;
use crate::http::state::AppState;
use crate::store::signin::{DevicePoll, NewDeviceCode, Refreshed, SignInStore, TokenPair};
use crate::store::{StoreError, User};

/// An answer in OAuth's error shape, or any of Relay's errors (store down, rate limited, 404).
pub enum OAuthFail {
    OAuth(StatusCode, &'static str, &'static str),
    Api(ApiError),
}

impl From<ApiError> for OAuthFail {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

impl From<StoreError> for OAuthFail {
    fn from(e: StoreError) -> Self {
        Self::Api(e.into())
    }
}

impl IntoResponse for OAuthFail {
    fn into_response(self) -> Response {
        match self {
            Self::OAuth(status, error, description) => {
                let mut r = (
                    status,
                    axum::Json(OAuthError {
                        error: error.into(),
                        error_description: description.into(),
                    }),
                )
                    .into_response();
                // RFC 6749 §5.1: token answers are never cached.
                r.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                r
            }
            Self::Api(e) => e.into_response(),
        }
    }
}

fn bad(error: &'static str, description: &'static str) -> OAuthFail {
    OAuthFail::OAuth(StatusCode::BAD_REQUEST, error, description)
}

/// A form body; fields this version does not know are ignored (RFC 6749 §3.2, RFC 8628 §3.1).
fn form<T: DeserializeOwned>(body: &Bytes) -> Result<T, OAuthFail> {
    serde_urlencoded::from_bytes(body).map_err(|_| {
        bad(
            "invalid_request",
            "the body must be a form (application/x-www-form-urlencoded)",
        )
    })
}

/// The sign-in store and `[auth]`, or the open-mode 404.
fn signin(state: &AppState) -> Result<(&std::sync::Arc<dyn SignInStore>, &AuthConfig), ApiError> {
    match (state.signin(), state.config().auth.as_ref()) {
        (Some(store), Some(auth)) => Ok((store, auth)),
        _ => Err(open_mode_404()),
    }
}

fn user_agent(headers: &HeaderMap) -> String {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    ua.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// Where agents sign in (RFC 8414).
#[utoipa::path(get, path = "/.well-known/oauth-authorization-server", tag = "sign-in",
    responses(
        (status = 200, description = "The endpoints of the device flow, as absolute URLs on Relay's own origin", body = AuthServerMetadata),
        (status = 404, description = "`not_found`: open mode (sign-in needs `[auth]`)", body = relay_wire::ErrorBody),
    ))]
pub async fn get_metadata(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<axum::Json<AuthServerMetadata>, ApiError> {
    signin(&state)?;
    let base = base_url(&state, &headers);
    Ok(axum::Json(AuthServerMetadata {
        issuer: base.clone(),
        device_authorization_endpoint: format!("{base}/oauth/device_authorization"),
        token_endpoint: format!("{base}/oauth/token"),
        revocation_endpoint: format!("{base}/oauth/revoke"),
        grant_types_supported: vec![DEVICE_GRANT.into(), "refresh_token".into()],
    }))
}

/// Start a device sign-in (RFC 8628 §3.1-3.2).
#[utoipa::path(post, path = "/oauth/device_authorization", tag = "sign-in",
    request_body(content = DeviceAuthorizationForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "The codes: the client polls with `device_code`, the user confirms `user_code` at `verification_uri`", body = DeviceAuthorization),
        (status = 404, description = "`not_found`: open mode", body = relay_wire::ErrorBody),
        (status = 429, description = "`rate_limited`: too many sign-ins started from this address", body = relay_wire::ErrorBody),
    ))]
pub async fn device_authorization(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OAuthFail> {
    let (store, auth) = signin(&state)?;
    let request: DeviceAuthorizationForm = form(&body)?;
    if let Some(ip) = client {
        state.limits().device.check(&ip.to_string()).await?;
    }
    let surface: String = request
        .surface
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(64)
        .collect();
    let device_code = new_device_code();
    let now = crate::clock::now();
    // A user code is 34 bits: a clash with a live one is rare, and a second draw settles it.
    let mut attempts = 0;
    let user_code = loop {
        let user_code = new_user_code();
        let stored = store
            .create_device_code(NewDeviceCode {
                code_hash: token_hash(&device_code),
                user_code: user_code.clone(),
                surface: surface.clone(),
                user_agent: user_agent(&headers),
                created_at: now,
                expires_at: now + auth.device_code_ttl_secs as f64,
            })
            .await;
        match stored {
            Ok(()) => break user_code,
            Err(StoreError::Conflict(_)) if attempts < 3 => attempts += 1,
            Err(e) => return Err(e.into()),
        }
    };
    let base = base_url(&state, &headers);
    let mut response = axum::Json(DeviceAuthorization {
        device_code,
        verification_uri: format!("{base}/device"),
        verification_uri_complete: format!("{base}/device?user_code={user_code}"),
        user_code,
        expires_in: auth.device_code_ttl_secs,
        interval: INTERVAL_SECS,
    })
    .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// A fresh access token and refresh token, not yet stored.
struct Drawn {
    pair: TokenPair,
    access: String,
    refresh: String,
}

fn draw(auth: &AuthConfig, now: f64) -> Drawn {
    let access = new_token();
    let refresh = new_refresh_token();
    Drawn {
        pair: TokenPair {
            family: new_id("f_"),
            access_hash: token_hash(&access),
            access_expires_at: now + auth.access_token_ttl_secs as f64,
            refresh_hash: token_hash(&refresh),
            refresh_expires_at: now + f64::from(auth.refresh_token_ttl_days) * 86_400.0,
        },
        access,
        refresh,
    }
}

fn token_answer(drawn: Drawn, auth: &AuthConfig, user: User) -> Response {
    let mut r = axum::Json(TokenResponse {
        access_token: drawn.access,
        token_type: "Bearer".into(),
        expires_in: auth.access_token_ttl_secs,
        refresh_token: drawn.refresh,
        email: user.email,
    })
    .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// Poll for a device sign-in's tokens, or refresh them.
#[utoipa::path(post, path = "/oauth/token", tag = "sign-in",
    request_body(content = TokenForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "The tokens: `access_token` is a Relay token for `expires_in` seconds", body = TokenResponse),
        (status = 400, description = "`authorization_pending`, `slow_down`, `access_denied`, `expired_token`, `invalid_grant` (unknown or used device code), `invalid_request`, `unsupported_grant_type`", body = OAuthError),
        (status = 401, description = "`invalid_grant`: the refresh token is unknown, expired or revoked; a reused one revokes its whole sign-in", body = OAuthError),
        (status = 404, description = "`not_found`: open mode", body = relay_wire::ErrorBody),
    ))]
pub async fn token(State(state): State<AppState>, body: Bytes) -> Result<Response, OAuthFail> {
    let (store, auth) = signin(&state)?;
    let request: TokenForm = form(&body)?;
    let now = crate::clock::now();
    match request.grant_type.as_deref() {
        Some(DEVICE_GRANT) => {
            let code = request
                .device_code
                .ok_or_else(|| bad("invalid_request", "device_code is required"))?;
            match store.poll_device(&token_hash(&code), now).await? {
                DevicePoll::Approved(user) => {
                    let drawn = draw(auth, now);
                    store.create_token_pair(&user.id, &drawn.pair, now).await?;
                    Ok(token_answer(drawn, auth, user))
                }
                DevicePoll::Pending { last_poll_at }
                    if last_poll_at.is_some_and(|t| now - t < (INTERVAL_SECS - 1) as f64) =>
                {
                    Err(bad(
                        "slow_down",
                        "polling too fast: wait 5 more seconds between polls",
                    ))
                }
                DevicePoll::Pending { .. } => Err(bad(
                    "authorization_pending",
                    "the code has not been approved yet",
                )),
                DevicePoll::Denied => Err(bad("access_denied", "the sign-in was denied")),
                DevicePoll::Expired => Err(bad(
                    "expired_token",
                    "the code expired before it was approved; sign in again",
                )),
                DevicePoll::Unknown => {
                    Err(bad("invalid_grant", "unknown or already used device code"))
                }
            }
        }
        Some("refresh_token") => {
            let old = request
                .refresh_token
                .ok_or_else(|| bad("invalid_request", "refresh_token is required"))?;
            let invalid = |d| OAuthFail::OAuth(StatusCode::UNAUTHORIZED, "invalid_grant", d);
            // The new pair is drawn first and stored by the statement that spends the old token.
            let drawn = draw(auth, now);
            match store.refresh(&token_hash(&old), &drawn.pair, now).await? {
                Refreshed::Rotated(user) => Ok(token_answer(drawn, auth, user)),
                Refreshed::Reused => Err(invalid(
                    "this refresh token was already used: every token of the sign-in is revoked; sign in again",
                )),
                Refreshed::Invalid => Err(invalid(
                    "the refresh token is unknown, expired or revoked; sign in again",
                )),
            }
        }
        Some(_) => Err(bad(
            "unsupported_grant_type",
            "grant_type must be urn:ietf:params:oauth:grant-type:device_code or refresh_token",
        )),
        None => Err(bad("invalid_request", "grant_type is required")),
    }
}

/// Revoke an access or refresh token (RFC 7009). Always 200.
#[utoipa::path(post, path = "/oauth/revoke", tag = "sign-in",
    request_body(content = RevokeForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "The token no longer works (a refresh token takes its whole sign-in with it); also for an unknown token"),
        (status = 404, description = "`not_found`: open mode", body = relay_wire::ErrorBody),
    ))]
pub async fn revoke(State(state): State<AppState>, body: Bytes) -> Result<Response, OAuthFail> {
    let (store, _) = signin(&state)?;
    let request: RevokeForm = form(&body)?;
    if let Some(token) = request.token.filter(|t| !t.is_empty()) {
        store.revoke_token(&token_hash(&token)).await?;
    }
    Ok(StatusCode::OK.into_response())
}
