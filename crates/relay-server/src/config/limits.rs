//! `[limits]`: per-caller rate limits, the signin and signup throttles, and where they are counted.

use serde::Deserialize;

/// `[limits]`: the contract's default per-caller rate limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    pub agent_per_minute: u32,
    pub agent_burst: u32,
    pub suggest_per_minute: u32,
    pub suggest_burst: u32,
    /// Failed signins allowed per email and per client address in `signin_window_secs`.
    pub signin_failures: u32,
    /// The window of `signin_failures`: a lock lasts until the oldest counted failure is this old.
    pub signin_window_secs: u64,
    /// Signups allowed per client address in an hour (each one costs an Argon2id hash).
    pub signups_per_hour: u32,
    /// Device sign-ins (agents' `/login`) started per client address: sustained per minute, and burst.
    pub device_per_minute: u32,
    pub device_burst: u32,
    /// A Redis server (`redis://` or `rediss://`) that shares these limits across instances;
    /// absent: each instance counts in its own memory.
    pub url: Option<String>,
    /// Key prefix in Redis, so several deployments can share one server.
    pub prefix: String,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            agent_per_minute: 120,
            agent_burst: 30,
            suggest_per_minute: 300,
            suggest_burst: 20,
            signin_failures: 10,
            signin_window_secs: 900,
            signups_per_hour: 20,
            device_per_minute: 6,
            device_burst: 20,
            url: None,
            prefix: "relay".to_owned(),
        }
    }
}
