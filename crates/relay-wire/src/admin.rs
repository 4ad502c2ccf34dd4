//! Account administration for operators (role `admin`): the listing, the change and the delete,
//! the same effects as `relay users list|set|delete`.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// One account as an operator sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"id": "u_3f9a1c0d2b7e8f41", "email": "ada@example.com", "role": "user",
    "limit": 100, "used": 12, "remaining": 88, "created_at": 1_763_900_000.0}))]
pub struct AdminUser {
    pub id: String,
    pub email: String,
    /// `user` or `admin`.
    pub role: String,
    /// The effective quota; `-1` is unlimited (every admin, and accounts set to `-1`).
    pub limit: i64,
    pub used: i64,
    /// `-1` for unlimited accounts.
    pub remaining: i64,
    /// Unix time in seconds.
    pub created_at: f64,
    /// What `used` counts: `month` or `never` (`[auth] quota_period`).
    #[serde(default)]
    pub quota_period: String,
    /// When `used` next goes back to 0 (RFC 3339, UTC); null for `never`.
    #[serde(default)]
    pub quota_resets_at: Option<String>,
    /// Input plus output tokens per calendar month (UTC), the default's when the account has
    /// none of its own; `-1` unlimited.
    #[serde(default)]
    pub token_budget: i64,
    /// Tokens used this calendar month (UTC).
    #[serde(default)]
    pub tokens_used: i64,
    /// When `tokens_used` next goes back to 0 (RFC 3339, UTC).
    #[serde(default)]
    pub tokens_resets_at: Option<String>,
    /// USD per calendar month (UTC), counted from the ledger's `cost_usd`, the default's when
    /// the account has none of its own; `-1` unlimited.
    #[serde(default = "crate::account::unlimited_usd")]
    pub spend_budget_usd: f64,
    /// USD spent this calendar month (UTC) on priced models.
    #[serde(default)]
    pub spend_used_usd: f64,
    /// The configured models the account may use; null for every one.
    #[serde(default)]
    pub allowed_models: Option<Vec<String>>,
}

/// `GET /v1/admin/users` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UserListQuery {
    /// Default 50; above 200 is clamped to 200; negative is 400.
    #[serde(default)]
    pub limit: Option<i64>,
    /// Default 0; negative is 400.
    #[serde(default)]
    pub offset: Option<i64>,
    /// Only accounts whose email contains this text (any case); `total` counts the matches.
    #[serde(default)]
    pub q: Option<String>,
}

/// `GET /v1/admin/users`: oldest account first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UserList {
    /// Every account, not only this page.
    pub total: u64,
    pub items: Vec<AdminUser>,
}

/// `PATCH /v1/admin/users/{email}`: what to change; absent fields stay as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"limit": 500, "reset_usage": true}))]
pub struct UserPatch {
    /// `user` or `admin`.
    #[serde(default)]
    pub role: Option<String>,
    /// A count, or `-1` for unlimited.
    #[serde(default)]
    #[schema(minimum = -1)]
    pub limit: Option<i64>,
    /// Sets `used` back to 0.
    #[serde(default)]
    pub reset_usage: Option<bool>,
    /// Input plus output tokens per calendar month (UTC), or `-1` for unlimited.
    #[serde(default)]
    #[schema(minimum = -1)]
    pub token_budget: Option<i64>,
    /// USD per calendar month (UTC), or `-1` for unlimited.
    #[serde(default)]
    #[schema(minimum = -1)]
    pub spend_budget_usd: Option<f64>,
    /// The configured models the account may use (each must be configured), or `null` for
    /// every one; absent leaves it as it is.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Vec<String>>)]
    pub allowed_models: Option<Option<Vec<String>>>,
}

/// A field that may be `null` (`Some(None)`) or absent (`None`, through `default`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// `POST /v1/admin/users`: a new account, as `relay users add` makes one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"email": "bob@example.com", "password": "correct horse battery", "role": "user", "limit": 500, "token_budget": 2_000_000}))]
pub struct NewAccount {
    pub email: String,
    /// 8 to 256 characters: the account's first password, to hand to its owner.
    pub password: String,
    /// `user` (default) or `admin`.
    #[serde(default)]
    pub role: Option<String>,
    /// A count, or `-1` for unlimited; default `[auth] default_limit`.
    #[serde(default)]
    #[schema(minimum = -1)]
    pub limit: Option<i64>,
    /// Input plus output tokens per calendar month (UTC), or `-1` for unlimited; default
    /// `[auth] default_token_budget`.
    #[serde(default)]
    #[schema(minimum = -1)]
    pub token_budget: Option<i64>,
}

/// The account after a change, or as it was before a delete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UserResult {
    pub ok: bool,
    pub user: AdminUser,
}
