//! Managed settings for agents: `GET /managed/settings` (Claude Code fetches its
//! `managed-settings.json` from the gateway it signed in to), and the admin endpoints that set one
//! document for everyone and optionally one per account, which replaces the shared one.
//!
//! The checksum is what Claude Code computes itself: `sha256:` + hex SHA-256 of the settings with
//! keys sorted at every level and no whitespace. It is the ETag too, so a poll with a matching
//! `If-None-Match` is a bodiless 304.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use relay_wire::signin::ManagedSettings;
use relay_wire::{ErrorBody, ErrorCode, OkResponse};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::accounts::Caller;
use crate::accounts::token::bearer_token;
use crate::domain::{Email, Role};
use crate::error::{ApiError, ApiResult};
use crate::http::compat::errors::{Api, respond};
use crate::http::extract::Json;
use crate::http::state::AppState;
use crate::store::signin::{AgentSettings, SignInStore};

/// The JSON text with keys sorted at every level and no whitespace.
pub fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // Sorting here keeps the order whatever serde_json's map keeps (its `preserve_order` feature).
    sorted(value).to_string()
}

pub fn checksum(canonical: &str) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    )
}

fn new_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    // Version 4, variant RFC 4122.
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

fn document(stored: AgentSettings) -> ApiResult<ManagedSettings> {
    let settings: Value = serde_json::from_str(&stored.settings).map_err(ApiError::internal)?;
    Ok(ManagedSettings {
        uuid: stored.uuid,
        checksum: checksum(&stored.settings),
        settings,
    })
}

/// Whether `If-None-Match` names this ETag (`*` is answered as if absent: Claude Desktop sends it
/// only to ask whether settings exist).
fn matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/").trim_matches('"'))
        .any(|t| t == etag)
}

/// The caller's managed settings for Claude Code.
#[utoipa::path(get, path = "/managed/settings", tag = "sign-in",
    security(("bearer" = [])),
    params(("If-None-Match" = Option<String>, Header, description = "The checksum the client holds, quoted")),
    responses(
        (status = 200, description = "The caller's document (their own, else the shared one), with `ETag: \"<checksum>\"`", body = ManagedSettings),
        (status = 304, description = "`If-None-Match` names the current checksum"),
        (status = 401, description = "`authentication_error` (Anthropic's shape), `x-should-retry: false`", body = crate::http::compat::anthropic::AnthropicErrorBody),
        (status = 404, description = "No policy applies to the caller (or open mode)", body = ErrorBody),
    ))]
pub async fn get_managed_settings(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let caller = match Caller::from_token(&state, bearer_token(&headers)).await {
        Ok(c) => c,
        Err(e) => return respond(Api::Anthropic, e),
    };
    match managed(&state, caller, &headers).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn managed(state: &AppState, caller: Caller, headers: &HeaderMap) -> ApiResult<Response> {
    let (Caller::User(user), Some(store)) = (caller, state.signin()) else {
        return Err(ApiError::not_found(
            "managed settings need accounts ([auth])",
        ));
    };
    let stored = match store.agent_settings(Some(&user.id)).await? {
        Some(own) => Some(own),
        None => store.agent_settings(None).await?,
    };
    let Some(stored) = stored else {
        return Err(ApiError::not_found(
            "no managed settings apply to this account",
        ));
    };
    let doc = document(stored)?;
    let etag =
        HeaderValue::from_str(&format!("\"{}\"", doc.checksum)).map_err(ApiError::internal)?;
    let mut response = if matches(headers, &doc.checksum) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        axum::Json(doc).into_response()
    };
    response.headers_mut().insert(header::ETAG, etag);
    Ok(response)
}

/// The store and the scope an admin call names: the shared document, or one account's.
async fn admin_scope<'a>(
    state: &'a AppState,
    caller: &Caller,
    email: Option<&str>,
) -> ApiResult<(&'a std::sync::Arc<dyn SignInStore>, Option<String>)> {
    let (Caller::User(user), Some(store), Some(auth)) = (caller, state.signin(), state.auth())
    else {
        return Err(ApiError::not_found(
            "managed settings need accounts ([auth])",
        ));
    };
    if user.role != Role::Admin {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only an admin may manage agent settings",
        ));
    }
    let Some(email) = email else {
        return Ok((store, None));
    };
    let email = Email::parse(email).map_err(ApiError::invalid)?;
    let target = auth
        .user_by_email(email.as_str())
        .await?
        .ok_or_else(|| ApiError::not_found("no account with this email"))?
        .0;
    Ok((store, Some(target.id)))
}

async fn get_scope(
    state: &AppState,
    caller: Caller,
    email: Option<&str>,
) -> ApiResult<axum::Json<ManagedSettings>> {
    let (store, scope) = admin_scope(state, &caller, email).await?;
    let stored = store
        .agent_settings(scope.as_deref())
        .await?
        .ok_or_else(|| ApiError::not_found("no document is set here"))?;
    Ok(axum::Json(document(stored)?))
}

async fn put_scope(
    state: &AppState,
    caller: Caller,
    email: Option<&str>,
    settings: Value,
) -> ApiResult<axum::Json<ManagedSettings>> {
    let (store, scope) = admin_scope(state, &caller, email).await?;
    if !settings.is_object() {
        return Err(ApiError::invalid(
            "the settings must be a JSON object (a managed-settings.json)",
        ));
    }
    let text = canonical(&settings);
    if text.len() > 256 * 1024 {
        return Err(ApiError::invalid("the settings must be under 256 KiB"));
    }
    let stored = store
        .put_agent_settings(scope.as_deref(), &text, &new_uuid(), crate::clock::now())
        .await?;
    Ok(axum::Json(document(stored)?))
}

async fn delete_scope(
    state: &AppState,
    caller: Caller,
    email: Option<&str>,
) -> ApiResult<axum::Json<OkResponse>> {
    let (store, scope) = admin_scope(state, &caller, email).await?;
    if !store.delete_agent_settings(scope.as_deref()).await? {
        return Err(ApiError::not_found("no document is set here"));
    }
    Ok(axum::Json(OkResponse::yes()))
}

/// The document every account without its own gets (admins only).
#[utoipa::path(get, path = "/v1/admin/agent-settings", tag = "sign-in",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The shared document", body = ManagedSettings),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: none is set", body = ErrorBody),
    ))]
pub async fn get_shared_settings(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<axum::Json<ManagedSettings>> {
    get_scope(&state, caller, None).await
}

/// Set the document every account without its own gets (admins only).
#[utoipa::path(put, path = "/v1/admin/agent-settings", tag = "sign-in",
    security(("bearer" = [])),
    request_body(content = Object, description = "Claude Code's managed-settings.json, e.g. `{\"env\": {\"CLAUDE_CODE_ENABLE_TELEMETRY\": \"1\"}}`"),
    responses(
        (status = 200, description = "Stored; its uuid and checksum", body = ManagedSettings),
        (status = 400, description = "Not a JSON object, or over 256 KiB", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
    ))]
pub async fn put_shared_settings(
    State(state): State<AppState>,
    caller: Caller,
    Json(settings): Json<Value>,
) -> ApiResult<axum::Json<ManagedSettings>> {
    put_scope(&state, caller, None, settings).await
}

/// Remove the shared document (admins only).
#[utoipa::path(delete, path = "/v1/admin/agent-settings", tag = "sign-in",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Removed", body = OkResponse),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: none is set", body = ErrorBody),
    ))]
pub async fn delete_shared_settings(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<axum::Json<OkResponse>> {
    delete_scope(&state, caller, None).await
}

/// One account's own document (admins only).
#[utoipa::path(get, path = "/v1/admin/users/{email}/agent-settings", tag = "sign-in",
    security(("bearer" = [])),
    params(("email" = String, Path, description = "The account's email", example = "bob@example.com")),
    responses(
        (status = 200, description = "The account's own document", body = ManagedSettings),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account, or it has no document of its own", body = ErrorBody),
    ))]
pub async fn get_user_settings(
    State(state): State<AppState>,
    caller: Caller,
    Path(email): Path<String>,
) -> ApiResult<axum::Json<ManagedSettings>> {
    get_scope(&state, caller, Some(&email)).await
}

/// Set one account's own document, which replaces the shared one for it (admins only).
#[utoipa::path(put, path = "/v1/admin/users/{email}/agent-settings", tag = "sign-in",
    security(("bearer" = [])),
    params(("email" = String, Path, description = "The account's email", example = "bob@example.com")),
    request_body(content = Object, description = "Claude Code's managed-settings.json for this account"),
    responses(
        (status = 200, description = "Stored", body = ManagedSettings),
        (status = 400, description = "Not a JSON object, or over 256 KiB", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account", body = ErrorBody),
    ))]
pub async fn put_user_settings(
    State(state): State<AppState>,
    caller: Caller,
    Path(email): Path<String>,
    Json(settings): Json<Value>,
) -> ApiResult<axum::Json<ManagedSettings>> {
    put_scope(&state, caller, Some(&email), settings).await
}

/// Remove one account's own document: the shared one applies again (admins only).
#[utoipa::path(delete, path = "/v1/admin/users/{email}/agent-settings", tag = "sign-in",
    security(("bearer" = [])),
    params(("email" = String, Path, description = "The account's email", example = "bob@example.com")),
    responses(
        (status = 200, description = "Removed", body = OkResponse),
        (status = 403, description = "`forbidden`: the caller is not an admin", body = ErrorBody),
        (status = 404, description = "`not_found`: no such account, or it has no document of its own", body = ErrorBody),
    ))]
pub async fn delete_user_settings(
    State(state): State<AppState>,
    caller: Caller,
    Path(email): Path<String>,
) -> ApiResult<axum::Json<OkResponse>> {
    delete_scope(&state, caller, Some(&email)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_level_without_whitespace() {
        let v: Value =
            serde_json::from_str(r#"{ "b": 1, "a": {"z": [ {"y": 2, "x": "é"} ], "c": null} }"#)
                .unwrap();
        assert_eq!(
            canonical(&v),
            r#"{"a":{"c":null,"z":[{"x":"é","y":2}]},"b":1}"#
        );
        assert_eq!(
            checksum("{}"),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
