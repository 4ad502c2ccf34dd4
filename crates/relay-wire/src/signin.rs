//! Agents' sign-in (the OAuth 2.0 device flow of RFC 8628, as Claude Code's `/login` speaks it) and
//! API keys: the forms, answers and errors of `/oauth/*`, `/device` and `/v1/keys`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /.well-known/oauth-authorization-server` (RFC 8414).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuthServerMetadata {
    /// Relay's public base URL (`[server] public_url`).
    pub issuer: String,
    pub device_authorization_endpoint: String,
    pub token_endpoint: String,
    pub revocation_endpoint: String,
    /// The device grant and `refresh_token`.
    pub grant_types_supported: Vec<String>,
}

/// `POST /oauth/device_authorization`, form-encoded. Unknown fields are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct DeviceAuthorizationForm {
    /// The client application that is signing in (`claude_code`); shown on the approval page.
    #[serde(default)]
    pub surface: Option<String>,
}

/// The answer of `POST /oauth/device_authorization` (RFC 8628 §3.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeviceAuthorization {
    /// Opaque, 256 bits, single use; the client polls the token endpoint with it.
    pub device_code: String,
    /// What the user confirms on the verification page: `XXXX-XXXX`, base-20 letters.
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: String,
    /// Seconds the codes stay valid (600).
    pub expires_in: u64,
    /// Seconds to wait between polls (5).
    pub interval: u64,
}

/// `POST /oauth/token`, form-encoded: the device grant or the refresh grant.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct TokenForm {
    /// `urn:ietf:params:oauth:grant-type:device_code` or `refresh_token`.
    #[serde(default)]
    pub grant_type: Option<String>,
    #[serde(default)]
    pub device_code: Option<String>,
    #[serde(default)]
    pub refresh_token: Option<String>,
}

/// A token answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// A Relay token: it works on every endpoint a token works on, for `expires_in` seconds.
    pub access_token: String,
    /// `Bearer`.
    pub token_type: String,
    pub expires_in: u64,
    /// Exchanged once for a new pair (rotation); a second use revokes the whole sign-in.
    pub refresh_token: String,
    /// The account that approved the sign-in.
    pub email: String,
}

/// An OAuth error (RFC 6749 §5.2, RFC 8628 §3.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OAuthError {
    /// `authorization_pending`, `slow_down`, `access_denied`, `expired_token`, `invalid_grant`,
    /// `invalid_request`, `unsupported_grant_type`.
    pub error: String,
    pub error_description: String,
}

/// `POST /oauth/revoke`, form-encoded (RFC 7009).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct RevokeForm {
    #[serde(default)]
    pub token: Option<String>,
    /// `access_token` or `refresh_token`; either is looked up whatever the hint says.
    #[serde(default)]
    pub token_type_hint: Option<String>,
}

/// A pending sign-in as the verification page shows it (`GET /v1/device/{user_code}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeviceRequest {
    pub user_code: String,
    /// What the client called itself (`claude_code`).
    pub surface: String,
    /// The client's User-Agent.
    pub user_agent: String,
    /// Seconds before the code lapses.
    pub expires_in: u64,
}

/// `POST /v1/device/{user_code}`: the signed-in user's decision.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeviceDecision {
    /// `true` approves the sign-in for the caller's account; `false` denies it.
    pub approve: bool,
}

/// What `DELETE /v1/admin/users/{email}/sessions` ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SignedOut {
    pub ok: bool,
    /// Sessions and refresh tokens revoked (API keys stay).
    pub revoked: u64,
}

/// `POST /v1/keys`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NewKey {
    /// 1 to 64 characters, no control characters.
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    /// Days until the key stops working (1 to 3650); absent: it does not expire.
    #[serde(default)]
    pub expires_in_days: Option<u32>,
}

/// An API key as listed: never the key itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KeyInfo {
    pub id: String,
    pub name: String,
    /// The key's first 12 characters, to tell keys apart.
    pub prefix: String,
    /// The owner's email.
    pub email: String,
    pub created_at: f64,
    pub last_used_at: Option<f64>,
    pub expires_at: Option<f64>,
}

/// `POST /v1/keys`: the key, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CreatedKey {
    /// `rlk_` + 43 characters: send it as `Authorization: Bearer <key>`. It is not shown again.
    pub key: String,
    #[serde(flatten)]
    pub info: KeyInfo,
}

/// `GET /v1/keys`, `GET /v1/admin/keys`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<KeyInfo>,
}

/// `GET /managed/settings` and the admin agent-settings endpoints: a managed-settings document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ManagedSettings {
    /// Names the policy; it stays the same when the document is edited.
    pub uuid: String,
    /// `sha256:` + the hex SHA-256 of `settings` as JSON with keys sorted at every level and no
    /// whitespace; also the (quoted) `ETag`.
    pub checksum: String,
    /// Claude Code's `managed-settings.json` for the caller.
    #[schema(value_type = Object)]
    pub settings: serde_json::Value,
}
