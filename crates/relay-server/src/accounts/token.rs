//! Session tokens: `rly_` + 32 random bytes base64url; only their SHA-256 is stored.

use axum::http::{HeaderMap, header};
use base64::Engine;
use sha2::{Digest, Sha256};

/// A fresh token.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    format!(
        "rly_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// What the store keeps for a token.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The token of an `Authorization: Bearer …` header, if well-formed.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_the_contract_shape() {
        let t = new_token();
        assert!(t.starts_with("rly_"));
        assert_eq!(t.len(), 4 + 43);
        assert_ne!(t, new_token());
        assert_eq!(token_hash(&t).len(), 64);
    }

    #[test]
    fn bearer_header_parsing() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer_token(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer rly_abc".parse().unwrap());
        assert_eq!(bearer_token(&h), Some("rly_abc"));
        h.insert(header::AUTHORIZATION, "Basic xyz".parse().unwrap());
        assert_eq!(bearer_token(&h), None);
    }
}
