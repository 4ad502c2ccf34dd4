//! The secrets of agents' sign-in (RFC 8628): device codes, user codes, refresh tokens and API keys.
//!
//! A device code and a refresh token are 32 random bytes (256 bits), like a session token; only
//! their SHA-256 is stored (`token::token_hash`). A user code is what a person types: eight letters
//! of RFC 8628 §6.1's base-20 alphabet (no vowels, so no words; about 34 bits), shown `XXXX-XXXX`.

use base64::Engine;

/// RFC 8628 §6.1: consonants only, none that are easily mistaken for each other.
const USER_CODE_ALPHABET: &[u8; 20] = b"BCDFGHJKLMNPQRSTVWXZ";

fn secret(prefix: &str) -> String {
    let bytes: [u8; 32] = rand::random();
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// A device code: opaque, 256 bits.
pub fn new_device_code() -> String {
    secret("rdc_")
}

/// A refresh token: opaque, 256 bits.
pub fn new_refresh_token() -> String {
    secret("rrt_")
}

/// An API key: `rlk_` + 43 characters; `rlk_` + its first 8 characters is shown as its prefix.
pub fn new_api_key() -> String {
    secret("rlk_")
}

/// The part of a key that lists may show.
pub fn key_prefix(key: &str) -> String {
    key.chars().take(12).collect()
}

/// A new opaque id of a key or a sign-in: `k_` or `f_` + 16 hex.
pub fn new_id(prefix: &str) -> String {
    let bytes: [u8; 8] = rand::random();
    format!("{prefix}{}", hex::encode(bytes))
}

/// A fresh user code, `XXXX-XXXX`.
pub fn new_user_code() -> String {
    let mut out = String::with_capacity(9);
    for i in 0..8 {
        if i == 4 {
            out.push('-');
        }
        // 256 is not a multiple of 20: draw again above 240 so every letter is equally likely.
        let pick = loop {
            let b: u8 = rand::random();
            if b < 240 {
                break b % 20;
            }
        };
        out.push(char::from(USER_CODE_ALPHABET[usize::from(pick)]));
    }
    out
}

/// A typed user code in its stored form: case, spaces and dashes ignored (RFC 8628 §6.1);
/// `None` when it cannot be one.
pub fn normalize_user_code(typed: &str) -> Option<String> {
    let letters: Vec<u8> = typed
        .bytes()
        .filter(|b| !matches!(b, b'-' | b' '))
        .map(|b| b.to_ascii_uppercase())
        .collect();
    if letters.len() != 8 || !letters.iter().all(|b| USER_CODE_ALPHABET.contains(b)) {
        return None;
    }
    let text = String::from_utf8(letters).ok()?;
    Some(format!("{}-{}", &text[..4], &text[4..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_codes_use_the_base20_alphabet_and_round_trip() {
        for _ in 0..200 {
            let code = new_user_code();
            assert_eq!(code.len(), 9);
            assert_eq!(&code[4..5], "-");
            assert!(
                code.bytes()
                    .filter(|b| *b != b'-')
                    .all(|b| USER_CODE_ALPHABET.contains(&b))
            );
            assert_eq!(normalize_user_code(&code).as_deref(), Some(code.as_str()));
        }
        assert_eq!(
            normalize_user_code("wdjb mjht").as_deref(),
            Some("WDJB-MJHT")
        );
        assert_eq!(normalize_user_code("WDJB-MJH"), None);
        assert_eq!(
            normalize_user_code("AEIO-UBCD"),
            None,
            "vowels are not in the alphabet"
        );
    }

    #[test]
    fn device_codes_carry_256_bits() {
        let code = new_device_code();
        // 32 bytes in unpadded base64url are 43 characters.
        assert_eq!(code.len(), 4 + 43);
        assert_ne!(code, new_device_code());
        assert_eq!(key_prefix(&new_api_key()).len(), 12);
    }
}
