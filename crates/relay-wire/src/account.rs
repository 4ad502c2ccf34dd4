//! Accounts and sessions: signin/signup bodies, the session result (spec §2.4), the account snapshot
//! (§2.3) and the waitlist.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/auth/signin` and `POST /v1/auth/signup`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Credentials {
    /// Trimmed and lower-cased; one `@` with text on both sides and a dot in the domain; at most 254 characters.
    #[schema(
        pattern = r"^[^@\s\x00-\x1f\x7f-\x9f]+@[^@\s.\x00-\x1f\x7f-\x9f]+(\.[^@\s.\x00-\x1f\x7f-\x9f]+)+$",
        max_length = 254
    )]
    pub email: String,
    /// 8 to 256 characters.
    #[schema(min_length = 8, max_length = 256)]
    pub password: String,
}

/// Session result (spec §2.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Session {
    /// `rly_` followed by 32 random bytes in base64url; send it as `Authorization: Bearer <token>`.
    pub token: String,
    pub email: String,
    /// `user`, `admin`, or `local` in open mode.
    pub role: String,
    /// Quota of the account; `-1` is unlimited.
    pub limit: i64,
}

/// Account snapshot (spec §2.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Me {
    /// `false` when the service runs without an auth store (open mode).
    pub auth: bool,
    pub role: String,
    pub email: String,
    /// `-1` for unlimited accounts.
    pub limit: i64,
    pub used: i64,
    /// `-1` for unlimited accounts.
    pub remaining: i64,
    /// Input plus output tokens allowed per calendar month (UTC); `-1` unlimited.
    #[serde(default = "unlimited")]
    pub token_budget: i64,
    /// Input plus output tokens used this calendar month (UTC).
    #[serde(default)]
    pub tokens_used: i64,
    /// Never below 0; `-1` when the budget is unlimited.
    #[serde(default = "unlimited")]
    pub tokens_remaining: i64,
    /// What `used` counts: `month` (the current calendar month, UTC) or `never` (a lifetime
    /// count until an operator resets it); `[auth] quota_period`.
    #[serde(default = "never")]
    pub quota_period: String,
    /// When `used` next goes back to 0 (RFC 3339, UTC); null for `never` and in open mode.
    #[serde(default)]
    pub quota_resets_at: Option<String>,
    /// When `tokens_used` next goes back to 0: the start of the next calendar month (RFC 3339, UTC).
    #[serde(default)]
    pub tokens_resets_at: Option<String>,
    /// USD allowed per calendar month (UTC), counted from the usage ledger's `cost_usd`; `-1`
    /// unlimited.
    #[serde(default = "unlimited_usd")]
    pub spend_budget_usd: f64,
    /// USD spent this calendar month (UTC) on priced models; it resets with `tokens_used`.
    #[serde(default)]
    pub spend_used_usd: f64,
    /// The configured models the account may use; null for every one.
    #[serde(default)]
    pub allowed_models: Option<Vec<String>>,
}

fn never() -> String {
    "never".to_owned()
}

/// `-1`: the wire's "unlimited" for an amount.
pub(crate) fn unlimited_usd() -> f64 {
    -1.0
}

fn unlimited() -> i64 {
    -1
}

/// `POST /v1/waitlist`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WaitlistRequest {
    /// As for signup.
    #[schema(
        pattern = r"^[^@\s\x00-\x1f\x7f-\x9f]+@[^@\s.\x00-\x1f\x7f-\x9f]+(\.[^@\s.\x00-\x1f\x7f-\x9f]+)+$",
        max_length = 254
    )]
    pub email: String,
    /// Where the signup came from; defaults to `web`; at most 64 characters, no control characters.
    #[serde(default)]
    #[schema(max_length = 64, pattern = r"^[^\x00-\x1f\x7f-\x9f]*$")]
    pub source: Option<String>,
}
