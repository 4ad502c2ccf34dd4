//! A provider's own error message made fit to show a user and to log (issue 42, "say why"):
//! credentials, account ids, e-mail addresses and URLs' query strings are removed, control
//! characters folded to spaces, and the result is at most `MAX_CHARS` characters.
//!
//! Upstream messages can echo what the relay sent: OpenAI's "Incorrect API key provided:
//! sk-…" repeats the key, Gemini's errors name the Google project number, and any URL in a
//! message may carry `?key=…`. Removal errs on the side of too much: a long random-looking
//! word goes even when nothing says it is a key.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// The most characters of a provider's message that reach a user.
pub const MAX_CHARS: usize = 500;

/// What stands in for a removed credential.
const REDACTED: &str = "[redacted]";

/// One rule: what it matches and how the match is replaced.
struct Rule {
    pattern: Regex,
    replace: fn(&Captures<'_>) -> String,
}

/// The rules, in order: URLs first (a key in a query string is gone before the key rules run),
/// then credentials, then account ids and addresses.
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |pattern: &str, replace: fn(&Captures<'_>) -> String| {
        Regex::new(pattern)
            .ok()
            .map(|pattern| Rule { pattern, replace })
    };
    [
        // A URL keeps its scheme, host and path; its query and fragment go.
        rule(r#"(?i)\b(https?://[^\s?#"'<>]*)[?#][^\s"'<>]*"#, |c| {
            c[1].to_owned()
        }),
        // `Bearer xyz`, `Basic xyz`.
        rule(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=*-]+", |c| {
            format!("{} {REDACTED}", &c[1])
        }),
        // `api_key=…`, `token: …`, `password=…`.
        rule(
            r#"(?i)\b(api[_-]?key|x-api-key|key|token|access_token|secret|password|authorization)(\s*[=:]\s*)[^\s,;&"']+"#,
            |c| format!("{}{}{REDACTED}", &c[1], &c[2]),
        ),
        // Keys by their well-known prefixes, masked ones (`sk-proj-ab****yz`) included.
        rule(
            r"\b(?:sk|pk|rk)-[A-Za-z0-9_*.\-]{6,}|\b(?:AIza|ya29\.)[A-Za-z0-9_\-.]{10,}|\b(?:gsk|xai|rly|rlk|ghp|gho|hf|sess)[_-][A-Za-z0-9_*\-]{8,}",
            |_| REDACTED.to_owned(),
        ),
        // Account, organisation and project ids (`org-…`, `proj_…`, `user-…`, `acct_…`)
        // carrying a digit, so words like `user-agent` stay.
        rule(
            r"(?i)\b(?:org|organization|proj|project|user|acct|account|ws|workspace)[-_][A-Za-z0-9]{6,}\b",
            |c| {
                if c[0].bytes().any(|b| b.is_ascii_digit()) {
                    "[account]".to_owned()
                } else {
                    c[0].to_owned()
                }
            },
        ),
        // E-mail addresses name an account.
        rule(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}", |_| {
            "[email]".to_owned()
        }),
        // Long numbers are account or project numbers (Google's are 12 digits); token counts
        // and limits are shorter.
        rule(r"\b[0-9]{9,}\b", |_| "[id]".to_owned()),
        // Any other long word mixing letters and digits looks random: most likely a secret.
        rule(r"[A-Za-z0-9_\-+/=*]{24,}", |c| {
            let word = &c[0];
            let digits = word.bytes().any(|b| b.is_ascii_digit());
            let letters = word.bytes().any(|b| b.is_ascii_alphabetic());
            if digits && letters {
                REDACTED.to_owned()
            } else {
                word.to_owned()
            }
        }),
    ]
    .into_iter()
    .flatten()
    .collect()
});

/// `raw` as it may be shown: `None` when nothing is left.
pub fn provider_message(raw: &str) -> Option<String> {
    // Control characters (a terminal escape, a line end) become spaces; runs of spaces fold.
    let flat: String = raw
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    // Bounded before the rules run, so a huge body costs little; the rules only shorten.
    let mut text: String = flat.chars().take(MAX_CHARS * 4).collect();
    for rule in RULES.iter() {
        if let Cow::Owned(changed) = rule.pattern.replace_all(&text, rule.replace) {
            text = changed;
        }
    }
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.chars().count() <= MAX_CHARS {
        return Some(text.to_owned());
    }
    let mut cut: String = text.chars().take(MAX_CHARS - 1).collect();
    cut.push('…');
    Some(cut)
}

/// The message of a leg every model of which failed before answering: the last model's error
/// (its own message included), so the user sees why without the server's log.
pub fn before_output(last: &super::ProviderError) -> String {
    format!(
        "every model failed before answering; the last said: {last}; the quota unit was given back"
    )
}

/// The message of a leg every model of which refused with 429 before answering: the last
/// model's words too, since a 429 may mean a spent account (`insufficient_quota`) that no wait
/// fixes, not only a rate limit. The wait, where there is one, is the answer's `Retry-After`.
pub fn rate_limited_before_output(last: &super::ProviderError) -> String {
    format!(
        "every model refused for its rate limit or quota; the last said: {last}; the quota unit was given back"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(raw: &str) -> String {
        provider_message(raw).unwrap_or_default()
    }

    #[test]
    fn keeps_an_ordinary_message_whole() {
        let m = "The model `gpt-9` does not exist or you do not have access to it.";
        assert_eq!(clean(m), m);
        assert_eq!(
            clean("This model's maximum context length is 128000 tokens."),
            "This model's maximum context length is 128000 tokens."
        );
    }

    #[test]
    fn removes_keys_however_they_appear() {
        let m = clean(
            "Incorrect API key provided: sk-proj-AbCdEf1234567890abcdef. You can find your API key at https://platform.openai.com/account/api-keys.",
        );
        assert!(!m.contains("sk-proj"), "{m}");
        assert!(m.contains("[redacted]"), "{m}");
        assert!(
            m.contains("https://platform.openai.com/account/api-keys"),
            "{m}"
        );
        let masked = clean("Incorrect API key provided: sk-abc12***************************wxyz.");
        assert!(!masked.contains("sk-abc"), "{masked}");
        for secret in [
            "AIzaSyA1234567890abcdefghijklmnop",
            "gsk_0123456789abcdefABCDEF",
            "rly_9f8e7d6c5b4a39281706",
            "Q2hhbmdlTWUxMjM0NTY3ODkwYWJjZGVmZ2g",
        ] {
            let m = clean(&format!("bad credential {secret} given"));
            assert!(!m.contains(secret), "{m}");
        }
        assert_eq!(
            clean("header Authorization: Bearer abc.def-ghi"),
            "header Authorization: [redacted] [redacted]"
        );
        assert_eq!(
            clean("api_key=abc123 is wrong"),
            "api_key=[redacted] is wrong"
        );
    }

    #[test]
    fn removes_query_strings_account_ids_and_addresses() {
        let m = clean(
            "see https://generativelanguage.googleapis.com/v1beta/models?key=AIzaXYZ&alt=sse for details",
        );
        assert_eq!(
            m,
            "see https://generativelanguage.googleapis.com/v1beta/models for details"
        );
        let m = clean(
            "Rate limit reached for gpt-4.1 in organization org-a1B2c3D4e5F6g7H8 on tokens per min",
        );
        assert!(!m.contains("org-a1B2"), "{m}");
        assert!(m.contains("[account]"), "{m}");
        let m = clean("Consumer 'projects/123456789012' has been suspended.");
        assert!(!m.contains("123456789012"), "{m}");
        assert_eq!(clean("owner ada@example.com"), "owner [email]");
        assert_eq!(clean("a user-agent header"), "a user-agent header");
    }

    #[test]
    fn folds_control_characters_and_bounds_the_length() {
        assert_eq!(
            clean("line one\n\x1b[31mline two\t"),
            "line one [31mline two"
        );
        let long = "word ".repeat(400);
        let m = clean(&long);
        assert_eq!(m.chars().count(), MAX_CHARS);
        assert!(m.ends_with('…'));
        assert_eq!(provider_message(" \n\t "), None);
    }
}
