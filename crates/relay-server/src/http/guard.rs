//! The checks every request passes before routing: its client address, and what keeps open mode
//! away from web pages (issue 12.1, 12.4).
//!
//! A page in the user's browser can send "simple" requests (form or `text/plain` bodies) to the
//! loopback port without a CORS preflight, and a DNS-rebinding page reaches it under its own host
//! name. So a body must be declared JSON (which a simple request cannot do), and in open mode a
//! foreign `Origin` or a non-loopback `Host` is 403. Auth mode keeps its tokens in headers, never
//! cookies, so a page gains nothing there and only the media-type rule applies.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ipnet::IpNet;
use relay_wire::ErrorCode;

use crate::error::ApiError;
use crate::http::state::AppState;

/// The client's address as the lock-out, the rate limits and the access log see it.
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub IpAddr);

/// The middleware: records the client address, then refuses what open mode must not serve.
pub async fn check(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    if let Some(ip) = client_ip(peer, req.headers(), &state.config().trusted_proxies) {
        req.extensions_mut().insert(ClientIp(ip));
    }
    let path = req.uri().path();
    if let Err(e) = refuse(&state, req.headers(), takes_form(path) || takes_otlp(path)) {
        return e.into_response();
    }
    next.run(req).await
}

/// The OAuth endpoints of agents' sign-in, whose bodies are forms by their RFCs. A cross-site form
/// post gains nothing there: each needs a secret (a device code, a token) that only the agent holds.
pub fn takes_form(path: &str) -> bool {
    matches!(
        path,
        "/oauth/device_authorization" | "/oauth/token" | "/oauth/revoke"
    )
}

/// Agents' OTLP exports, protobuf by default (`http::telemetry`). A cross-site post gains nothing
/// there either: the export is only forwarded, tagged with the caller's own account, and open
/// mode's Origin check still applies.
pub fn takes_otlp(path: &str) -> bool {
    matches!(path, "/v1/metrics" | "/v1/logs" | "/v1/traces")
}

fn refuse(state: &AppState, headers: &HeaderMap, form_allowed: bool) -> Result<(), ApiError> {
    let config = state.config();
    if config.open_mode() {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !host_allowed(host, &config.allowed_hosts) {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "open mode answers only loopback host names and those in allowed_hosts",
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("null");
            if !origin_allowed(origin, host, &config.cors.allow_origins) {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "open mode refuses requests from other web origins; list them in [cors] allow_origins",
                ));
            }
        }
    }
    if has_body(headers) && !declares_json(headers) && !form_allowed {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "a request body must be sent with content-type application/json",
        ));
    }
    Ok(())
}

/// The client address: the TCP peer, unless the peer is a trusted proxy; then the right-most
/// `X-Forwarded-For` address that is not itself trusted (a client's own claims lie to the left).
pub fn client_ip(peer: Option<IpAddr>, headers: &HeaderMap, trusted: &[IpNet]) -> Option<IpAddr> {
    let peer = peer?.to_canonical();
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return Some(peer);
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let mut nearest = peer;
    for hop in hops.iter().rev() {
        // Something unparsable was written by whoever sent it to the last trusted hop: stop there.
        let Ok(ip) = hop.parse::<IpAddr>().map(|ip| ip.to_canonical()) else {
            return Some(nearest);
        };
        if !is_trusted(&ip) {
            return Some(ip);
        }
        nearest = ip;
    }
    Some(nearest)
}

/// `localhost`, `127.0.0.1` and `[::1]` on any port, or a name listed in `allowed_hosts`.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = strip_port(host);
    ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
        || allowed
            .iter()
            .any(|a| a.eq_ignore_ascii_case(name) || a.eq_ignore_ascii_case(host))
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |i| &host[..=i]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The relay's own origin (the console at `/console` calls from there), or a configured one.
pub(crate) fn origin_allowed(origin: &str, host: &str, allow_origins: &[String]) -> bool {
    let own = !host.is_empty()
        && ["http://", "https://"].iter().any(|scheme| {
            origin
                .strip_prefix(scheme)
                .is_some_and(|rest| rest.eq_ignore_ascii_case(host))
        });
    own || allow_origins
        .iter()
        .any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
}

fn has_body(headers: &HeaderMap) -> bool {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    length.is_some_and(|n| n > 0) || headers.contains_key(header::TRANSFER_ENCODING)
}

/// `application/json` or any `…+json` type, parameters (`; charset=utf-8`) ignored.
fn declares_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let mime = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = mime.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json") || subtype.to_ascii_lowercase().ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xff(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", v.parse().unwrap());
        h
    }

    #[test]
    fn forwarded_address_only_from_trusted_peers() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let peer = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let h = xff("6.6.6.6, 1.2.3.4, 10.0.0.7");
        assert_eq!(client_ip(peer("10.0.0.1"), &h, &trusted), peer("1.2.3.4"));
        assert_eq!(client_ip(peer("9.9.9.9"), &h, &trusted), peer("9.9.9.9"));
        assert_eq!(
            client_ip(peer("10.0.0.1"), &HeaderMap::new(), &trusted),
            peer("10.0.0.1")
        );
        assert_eq!(
            client_ip(peer("10.0.0.1"), &xff("junk, 10.0.0.3"), &trusted),
            peer("10.0.0.3")
        );
    }

    #[test]
    fn hosts_and_media_types() {
        assert!(host_allowed("localhost:7711", &[]));
        assert!(host_allowed("[::1]:7711", &[]));
        assert!(!host_allowed("attacker.example:7711", &[]));
        assert!(host_allowed("relay.lan:7711", &["relay.lan".into()]));
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            "application/vnd.x+json; charset=utf-8".parse().unwrap(),
        );
        assert!(declares_json(&h));
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(!declares_json(&h));
    }
}
