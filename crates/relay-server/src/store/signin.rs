//! What agents' sign-in keeps: device codes (the OAuth device flow), refresh tokens and API keys.
//!
//! Every secret is stored as its SHA-256 only (`accounts::token_hash`). An access token and an API
//! key are rows of `sessions`, so the bearer lookup, its cache and its eviction treat them as any
//! token; this store adds what ties them together (a sign-in's family, a key's record).

use async_trait::async_trait;

use super::{StoreResult, User};

/// A device authorization request as stored.
#[derive(Debug, Clone)]
pub struct NewDeviceCode {
    pub code_hash: String,
    pub user_code: String,
    pub surface: String,
    pub user_agent: String,
    pub created_at: f64,
    pub expires_at: f64,
}

/// A pending device code, as the verification page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingDevice {
    pub user_code: String,
    pub surface: String,
    pub user_agent: String,
    pub expires_at: f64,
}

/// What a poll of the token endpoint finds.
#[derive(Debug, Clone, PartialEq)]
pub enum DevicePoll {
    /// No such device code, or it was already exchanged.
    Unknown,
    Expired,
    Denied,
    /// Not decided yet; `last_poll_at` is the previous poll, if any.
    Pending {
        last_poll_at: Option<f64>,
    },
    /// Approved: the code is now used up, and this is the account that approved it.
    Approved(User),
}

/// A token pair to store for one sign-in (`family`).
#[derive(Debug, Clone)]
pub struct TokenPair {
    pub family: String,
    pub access_hash: String,
    pub access_expires_at: f64,
    pub refresh_hash: String,
    pub refresh_expires_at: f64,
}

/// What exchanging a refresh token did.
#[derive(Debug, Clone, PartialEq)]
pub enum Refreshed {
    /// The old token is spent; the new pair is stored for this account.
    Rotated(User),
    /// The token had been exchanged before: its whole family is revoked.
    Reused,
    /// Unknown, expired or revoked.
    Invalid,
}

/// An API key as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    pub id: String,
    pub user_id: String,
    pub email: String,
    pub name: String,
    pub prefix: String,
    pub created_at: f64,
    pub expires_at: Option<f64>,
    pub last_used_at: Option<f64>,
}

/// A key to store: its record and the hash its bearer lookup uses.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub prefix: String,
    pub token_hash: String,
    pub created_at: f64,
    pub expires_at: Option<f64>,
}

/// A managed-settings document as stored: canonical JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSettings {
    pub uuid: String,
    pub settings: String,
    pub updated_at: f64,
}

/// An API key that never expires is stored with this expiry in `sessions` (year 33658).
pub const NEVER: f64 = 1.0e12;

#[async_trait]
pub trait SignInStore: Send + Sync {
    /// Stores a new device code; `Conflict` when the user code is taken (the caller draws again).
    async fn create_device_code(&self, code: NewDeviceCode) -> StoreResult<()>;
    /// The pending, unexpired device code with this user code.
    async fn pending_device(&self, user_code: &str, now: f64)
    -> StoreResult<Option<PendingDevice>>;
    /// Approves (`Some(user)`) or denies (`None`) a pending, unexpired code; false when there is none.
    async fn decide_device(
        &self,
        user_code: &str,
        user_id: Option<&str>,
        now: f64,
    ) -> StoreResult<bool>;
    /// One poll: records its time and reports the code's state; an approved code is used up here.
    async fn poll_device(&self, code_hash: &str, now: f64) -> StoreResult<DevicePoll>;

    /// Stores an access token (a session) and a refresh token of one sign-in.
    async fn create_token_pair(&self, user_id: &str, pair: &TokenPair, now: f64)
    -> StoreResult<()>;
    /// Exchanges a refresh token for `pair` (whose `family` is ignored: the old token's is kept).
    async fn refresh(&self, old_hash: &str, pair: &TokenPair, now: f64) -> StoreResult<Refreshed>;
    /// Revokes an access or refresh token and, for a sign-in's token, the rest of its sign-in.
    async fn revoke_token(&self, token_hash: &str) -> StoreResult<()>;
    /// Ends every session and refresh token of the account (its API keys stay); how many went.
    async fn revoke_user_sessions(&self, user_id: &str) -> StoreResult<u64>;

    /// Stores an API key and its session row.
    async fn create_api_key(&self, key: &NewApiKey) -> StoreResult<()>;
    /// One account's keys (`Some(user_id)`) or everybody's, newest first.
    async fn list_api_keys(&self, user_id: Option<&str>) -> StoreResult<Vec<ApiKey>>;
    /// Revokes a key (of this account only, when `user_id` is given); false when there is none.
    async fn revoke_api_key(&self, id: &str, user_id: Option<&str>) -> StoreResult<bool>;
    /// Records that a key was used (the bearer lookup calls it at most once a minute per key).
    async fn touch_api_key(&self, token_hash: &str, now: f64) -> StoreResult<()>;

    /// The managed settings of one account (`Some(user_id)`) or the shared ones (`None`) exactly:
    /// no falling back from one to the other here.
    async fn agent_settings(&self, user_id: Option<&str>) -> StoreResult<Option<AgentSettings>>;
    /// Stores the document for that scope; a new scope gets `new_uuid`, an existing one keeps its own.
    async fn put_agent_settings(
        &self,
        user_id: Option<&str>,
        settings: &str,
        new_uuid: &str,
        now: f64,
    ) -> StoreResult<AgentSettings>;
    /// Removes the document of that scope; false when there was none.
    async fn delete_agent_settings(&self, user_id: Option<&str>) -> StoreResult<bool>;
}
