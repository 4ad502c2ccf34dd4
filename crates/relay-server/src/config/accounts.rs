//! `[auth]`: the accounts store, signup, token lifetime, quota and password hashing.

use serde::Deserialize;

use super::memory::{DEFAULT_BUSY_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, DEFAULT_STORE_URL};

/// `[auth]`: present means accounts, tokens and quota are enforced.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub url: String,
    pub signup: SignupMode,
    /// Quota of a new account; -1 is unlimited.
    pub default_limit: i64,
    /// Monthly token budget (input plus output tokens) of an account without its own; -1 unlimited.
    pub default_token_budget: i64,
    /// Monthly spend budget in USD (the ledger's `cost_usd`) of an account without its own; -1
    /// unlimited.
    pub default_spend_budget_usd: f64,
    pub token_ttl_days: u32,
    pub max_connections: u32,
    pub busy_timeout_ms: u64,
    /// Argon2id memory cost in KiB. The default is OWASP's current minimum (19 MiB, 2 passes, 1 lane).
    pub argon2_memory_kib: u32,
    /// Argon2id passes.
    pub argon2_iterations: u32,
    /// How long a device code (agents' `/login`) waits for approval on `/device`.
    pub device_code_ttl_secs: u64,
    /// Life of an access token handed to a signed-in agent; it refreshes before the end.
    pub access_token_ttl_secs: u64,
    /// A refresh token lapses after this many days unused.
    pub refresh_token_ttl_days: u32,
    /// What an account's `used` counts: the current calendar month (UTC) or its whole life.
    pub quota_period: QuotaPeriod,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            url: DEFAULT_STORE_URL.to_owned(),
            signup: SignupMode::Open,
            default_limit: 100,
            default_token_budget: -1,
            default_spend_budget_usd: -1.0,
            token_ttl_days: 30,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
            argon2_memory_kib: 19_456,
            argon2_iterations: 2,
            device_code_ttl_secs: 600,
            access_token_ttl_secs: 3600,
            refresh_token_ttl_days: 30,
            quota_period: QuotaPeriod::Month,
        }
    }
}

/// `[auth] quota_period`: `month` (the default, as token budgets count) or `never` (a lifetime
/// count until an operator resets it, as before issue 42).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuotaPeriod {
    #[default]
    Month,
    Never,
}

impl QuotaPeriod {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Month => "month",
            Self::Never => "never",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignupMode {
    #[default]
    Open,
    Closed,
}
