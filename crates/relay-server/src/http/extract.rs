//! Extractors of our own, so that every rejection is an `invalid_request` (or 413) in our shape,
//! naming the field at fault, and so identity comes only from the token.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::accounts::Caller;
use crate::error::ApiError;
use crate::http::state::AppState;
use relay_wire::ErrorCode;

/// A JSON body. Malformed JSON, wrong types and missing fields are 400 with the field's path.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large")
            } else {
                ApiError::invalid("cannot read the request body")
            }
        })?;
        parse_json(&bytes).map(Json)
    }
}

/// Parses a JSON body into `T`, naming the path of the first problem.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every request body is an object; serde would otherwise read a struct from an array too.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid("request body must be a JSON object"));
    }
    // Nearly every body is valid: it is read without tracking the path, which costs about as
    // much again as the parse (a 1 MB agent call), and only a body that fails is read a second
    // time, for the message that names where.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let what = if inner.is_syntax() || inner.is_eof() {
            format!("request body is not valid JSON ({inner})")
        } else if path == "." {
            inner.to_string()
        } else {
            format!("{inner} at `{path}`")
        };
        ApiError::invalid(what)
    })?;
    de.end().map_err(|_| {
        ApiError::invalid("request body has trailing characters after the JSON value")
    })?;
    Ok(value)
}

/// A query string, with our error shape on bad values.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(Query)
            .map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                if path == "." {
                    ApiError::invalid(format!("query string: {inner}"))
                } else {
                    ApiError::invalid(format!("query parameter `{path}`: {inner}"))
                }
            })
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Self::from_token(state, crate::accounts::token::bearer_token(&parts.headers)).await
    }
}

impl Caller {
    /// The caller a token (from whichever header an endpoint reads it) stands for.
    pub async fn from_token(state: &AppState, token: Option<&str>) -> Result<Self, ApiError> {
        Self::lookup(state, token, false).await
    }

    /// As `from_token`, with the account read from the store itself rather than the session cache:
    /// for answers that show `used`, which every leg moves.
    pub async fn from_token_fresh(state: &AppState, token: Option<&str>) -> Result<Self, ApiError> {
        Self::lookup(state, token, true).await
    }

    async fn lookup(state: &AppState, token: Option<&str>, fresh: bool) -> Result<Self, ApiError> {
        let Some(auth) = state.auth() else {
            return Ok(Self::Local);
        };
        let token = token.ok_or_else(ApiError::unauthorized)?;
        let hash = crate::accounts::token::token_hash(token);
        let now = crate::clock::now();
        let found = if fresh {
            auth.session_user_fresh(&hash, now).await?
        } else {
            auth.session_user(&hash, now).await?
        };
        match found {
            Some(user) => {
                crate::http::keys::touch(state, token).await;
                Ok(Self::User(user))
            }
            None => Err(ApiError::unauthorized()),
        }
    }
}

/// The caller, or why there is none, for a handler that answers the error itself.
///
/// The memory endpoints answer 503 in their own emptied shape (`{"ok": false, …}`, `{"notes": []}`:
/// spec §4.4 rule 4), and looking up a token's session can fail with the store (503) as much as the
/// note can; `Caller`'s own rejection is a plain `ApiError`, which has no such shape. Taking the
/// lookup's result lets the handler turn it into its `Shaped` answer with `?`. It also keeps the
/// order of answers: the lookup's error is answered only after the body and query extractors ran,
/// so a malformed request is a 400 whatever its token.
pub struct MaybeCaller(pub Result<Caller, ApiError>);

impl FromRequestParts<AppState> for MaybeCaller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(Caller::from_request_parts(parts, state).await))
    }
}

/// The client's IP address: the TCP peer, or behind a trusted proxy the forwarded address
/// (`guard::client_ip`); `None` only without connect info (never under `serve`).
pub struct ClientAddr(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(
            parts
                .extensions
                .get::<crate::http::guard::ClientIp>()
                .map(|c| c.0),
        ))
    }
}

/// The most bytes of a client's `x-request-id` Relay keeps (a longer one is cut to this).
pub const REQUEST_ID_MAX: usize = 128;

/// A client's `x-request-id` as Relay logs, stores and echoes it: its visible ASCII characters
/// only (spaces, controls and other bytes dropped), at most `REQUEST_ID_MAX` bytes; `None` when
/// nothing is left (Relay makes one).
pub fn sanitise_request_id(raw: &[u8]) -> Option<String> {
    let id: String = raw
        .iter()
        .filter(|b| b.is_ascii_graphic())
        .take(REQUEST_ID_MAX)
        .map(|&b| char::from(b))
        .collect();
    (!id.is_empty()).then_some(id)
}

/// The request's id from its `x-request-id` header, sanitised; empty when it has none.
pub fn request_id(headers: &axum::http::HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| sanitise_request_id(v.as_bytes()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_keep_visible_ascii_up_to_the_cap() {
        assert_eq!(
            sanitise_request_id(b"abc-123_X").as_deref(),
            Some("abc-123_X")
        );
        assert_eq!(
            sanitise_request_id(b" a b\tc\x7f\xc3\xa9d ").as_deref(),
            Some("abcd")
        );
        assert_eq!(sanitise_request_id(b" \t\x01"), None);
        let long = sanitise_request_id(&[b'z'; 7_000]).unwrap();
        assert_eq!(long.len(), REQUEST_ID_MAX);
    }
}
