//! `[server]` (the address clients reach Relay at, request reading, and the identity providers
//! see) and `[cors]` (who may call the API from a browser). (The listener's own settings, `bind`,
//! `allowed_hosts`, `trusted_proxies` and `shutdown_grace_ms`, sit at the top level of `Config`.)

use serde::Deserialize;

/// `[cors]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorsConfig {
    /// Origins allowed to call the API from a browser; empty keeps CORS closed.
    pub allow_origins: Vec<String>,
}

/// `[server]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The base URL clients and browsers reach Relay at (`https://relay.example.com`), named in the
    /// sign-in metadata and the device flow's verification link. Absent on a loopback bind: the
    /// loopback address the request came to. Required with `[auth]` on any other bind.
    pub public_url: Option<String>,
    /// A request body must arrive whole within this long (from the first byte read); a slower
    /// upload is refused with 408 and its connection closed.
    pub body_timeout_ms: u64,
    /// The key of the per-account identifier Relay sends providers (`user`,
    /// `safety_identifier`, `metadata.user_id`) in place of the client's own. Absent: one is
    /// generated on first start and kept in the store, so every instance sends the same.
    pub identity_secret: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            public_url: None,
            body_timeout_ms: 30_000,
            identity_secret: None,
        }
    }
}

impl ServerConfig {
    /// The message naming the key at fault, if any.
    pub fn problem(&self) -> Option<String> {
        if self.body_timeout_ms == 0 || self.body_timeout_ms > 3_600_000 {
            return Some("server.body_timeout_ms must be between 1 and 3600000".into());
        }
        if self
            .identity_secret
            .as_deref()
            .is_some_and(|s| s.trim().len() < 16)
        {
            return Some("server.identity_secret must be at least 16 characters".into());
        }
        None
    }
}
