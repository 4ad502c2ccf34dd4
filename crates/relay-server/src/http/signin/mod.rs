//! Agents' sign-in: the OAuth 2.0 device flow (RFC 8628) that Claude Code's `/login` runs against
//! a gateway, its discovery document (RFC 8414), token refresh with rotation, revocation
//! (RFC 7009), and the verification page at `/device` where a person approves the code.
//!
//! Only in auth mode: in open mode every path here answers 404 saying sign-in needs `[auth]`.
//! The OAuth endpoints take form bodies and answer OAuth's `{error, error_description}`; the
//! guard lets form bodies through to them alone (`guard::takes_form`). An access token is an
//! ordinary Relay token (a `sessions` row) with a short life; see `store::signin`.

pub mod device;
pub mod oauth;
pub mod settings;
pub mod usage;

use axum::http::{HeaderMap, header};

use crate::error::ApiError;
use crate::http::state::AppState;

/// The grant type of the device flow.
pub const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Seconds a client waits between polls.
pub const INTERVAL_SECS: u64 = 5;

/// The 404 of every sign-in path in open mode.
pub fn open_mode_404() -> ApiError {
    ApiError::not_found(
        "sign-in for agents needs accounts: add an [auth] table to Relay's configuration",
    )
}

/// The base URL clients reach Relay at: `[server] public_url`, or on a loopback bind the loopback
/// address the request came to (so a server on port 0 names its real port), else the bind address.
pub fn base_url(state: &AppState, headers: &HeaderMap) -> String {
    let config = state.config();
    if let Some(url) = &config.server.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    if ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
    {
        format!("http://{host}")
    } else {
        format!("http://{}", config.bind)
    }
}
