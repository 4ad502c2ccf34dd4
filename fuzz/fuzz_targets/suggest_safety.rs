//! Arbitrary text through the suggestion safety check: no panic, no hang (libFuzzer's -timeout).
#![no_main]

use libfuzzer_sys::fuzz_target;
use relay_safety::{check_command, check_completion, looks_like_secret, redact_secrets};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = check_command(text);
    let _ = looks_like_secret(text);
    let _ = redact_secrets(text);
    let cut = text.char_indices().nth(text.chars().count() / 3).map_or(0, |(i, _)| i);
    let _ = check_completion(&text[..cut], text);
});
