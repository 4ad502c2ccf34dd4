//! `[cors]`: who may call the API from a browser; `[server]`: the address clients reach Relay at.
//! (The listener's own settings, `bind`, `allowed_hosts`, `trusted_proxies` and
//! `shutdown_grace_ms`, sit at the top level of `Config`.)

use serde::Deserialize;

/// `[cors]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorsConfig {
    /// Origins allowed to call the API from a browser; empty keeps CORS closed.
    pub allow_origins: Vec<String>,
}

/// `[server]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The base URL clients and browsers reach Relay at (`https://relay.example.com`), named in the
    /// sign-in metadata and the device flow's verification link. Absent on a loopback bind: the
    /// loopback address the request came to. Required with `[auth]` on any other bind.
    pub public_url: Option<String>,
}
