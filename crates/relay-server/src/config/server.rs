//! `[cors]`: who may call the API from a browser. (The listener's own settings, `bind`,
//! `allowed_hosts`, `trusted_proxies` and `shutdown_grace_ms`, sit at the top level of `Config`.)

use serde::Deserialize;

/// `[cors]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorsConfig {
    /// Origins allowed to call the API from a browser; empty keeps CORS closed.
    pub allow_origins: Vec<String>,
}
