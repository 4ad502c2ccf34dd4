//! Secret detection: credential-shaped tokens, private keys and `password=...` assignments.

use super::text::find;

#[derive(Clone, Copy)]
enum Class {
    UpperNum,
    AlNum,
    Word,
    WordDash,
    AlNumDash,
}

impl Class {
    fn has(self, c: u8) -> bool {
        match self {
            Class::UpperNum => c.is_ascii_uppercase() || c.is_ascii_digit(),
            Class::AlNum => c.is_ascii_alphanumeric(),
            Class::Word => c.is_ascii_alphanumeric() || c == b'_',
            Class::WordDash => c.is_ascii_alphanumeric() || c == b'_' || c == b'-',
            Class::AlNumDash => c.is_ascii_alphanumeric() || c == b'-',
        }
    }
}

/// Prefix, body character class, minimum body length. Longer prefixes first.
const TOKEN_SHAPES: &[(&[u8], Class, usize)] = &[
    (b"github_pat_", Class::Word, 22),
    (b"sk_live_", Class::AlNum, 16),
    (b"rk_live_", Class::AlNum, 16),
    (b"sk_test_", Class::AlNum, 16),
    (b"rk_test_", Class::AlNum, 16),
    (b"pk_live_", Class::AlNum, 16),
    (b"sk-ant-", Class::WordDash, 10),
    (b"glpat-", Class::WordDash, 20),
    (b"xoxb-", Class::AlNumDash, 10),
    (b"xoxp-", Class::AlNumDash, 10),
    (b"xoxa-", Class::AlNumDash, 10),
    (b"xoxr-", Class::AlNumDash, 10),
    (b"xoxs-", Class::AlNumDash, 10),
    (b"AKIA", Class::UpperNum, 16),
    (b"ASIA", Class::UpperNum, 16),
    (b"ghp_", Class::AlNum, 36),
    (b"gho_", Class::AlNum, 36),
    (b"ghu_", Class::AlNum, 36),
    (b"ghs_", Class::AlNum, 36),
    (b"ghr_", Class::AlNum, 36),
    (b"npm_", Class::AlNum, 36),
    (b"sk-", Class::WordDash, 20),
];

/// Key names (case-insensitive suffixes) whose values are secrets.
const SECRET_KEY_SUFFIXES: &[&[u8]] = &[
    b"password",
    b"passwd",
    b"token",
    b"secret",
    b"api_key",
    b"apikey",
    b"api-key",
    b"access_key",
    b"access-key",
    b"secret_key",
    b"secret-key",
    b"private_key",
    b"private-key",
];

pub(super) fn secret_ranges(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    scan_token_shapes(b, &mut out);
    scan_private_keys(b, &mut out);
    scan_slack_webhooks(b, &mut out);
    scan_assignments(b, &mut out);
    scan_flag_values(b, &mut out);
    scan_url_credentials(b, &mut out);
    scan_bearer(b, &mut out);
    out
}

pub(super) fn merge_ranges(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        if let Some(last) = out.last_mut()
            && s <= last.1
        {
            last.1 = last.1.max(e);
            continue;
        }
        out.push((s, e));
    }
    out
}

fn scan_token_shapes(b: &[u8], out: &mut Vec<(usize, usize)>) {
    for i in 0..b.len() {
        if i > 0 && b[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        let rest = &b[i..];
        for &(prefix, class, min) in TOKEN_SHAPES {
            if rest.starts_with(prefix) {
                let body = rest[prefix.len()..]
                    .iter()
                    .take_while(|&&c| class.has(c))
                    .count();
                if body >= min {
                    out.push((i, i + prefix.len() + body));
                    break;
                }
            }
        }
    }
}

fn scan_private_keys(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let mut i = 0;
    while let Some(p) = find(b, i, b"-----BEGIN ") {
        let label_start = p + 11;
        let window_end = (label_start + 70).min(b.len());
        let window = b.get(label_start..window_end).unwrap_or_default();
        let header = find(window, 0, b"-----").map(|q| label_start + q);
        match header {
            Some(q)
                if b[label_start..q].ends_with(b"PRIVATE KEY")
                    && b[label_start..q]
                        .iter()
                        .all(|&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b' ') =>
            {
                let end = match find(b, q + 5, b"-----END ") {
                    Some(e) => find(b, e + 9, b"-----").map_or(b.len(), |f| f + 5),
                    None => b.len(),
                };
                out.push((p, end));
                i = end;
            }
            _ => i = label_start,
        }
    }
}

fn scan_slack_webhooks(b: &[u8], out: &mut Vec<(usize, usize)>) {
    const NEEDLE: &[u8] = b"hooks.slack.com/services/";
    let mut i = 0;
    while let Some(p) = find(b, i, NEEDLE) {
        let path = p + NEEDLE.len();
        let run = b[path..]
            .iter()
            .take_while(|&&c| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'_' | b'-'))
            .count();
        if run > 0 {
            let start = if p >= 8 && &b[p - 8..p] == b"https://" {
                p - 8
            } else if p >= 7 && &b[p - 7..p] == b"http://" {
                p - 7
            } else {
                p
            };
            out.push((start, path + run));
        }
        i = path;
    }
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')
}

fn is_secret_key(key: &[u8]) -> bool {
    let lower = key.to_ascii_lowercase();
    SECRET_KEY_SUFFIXES.iter().any(|s| lower.ends_with(s))
}

fn is_value_end(c: u8) -> bool {
    c.is_ascii_whitespace()
        || matches!(
            c,
            b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')' | b'\'' | b'"' | b'`'
        )
}

/// The value starting at `v` (after optional blanks), if it is a literal of 8+ bytes.
fn value_at(b: &[u8], mut v: usize) -> Option<(usize, usize)> {
    while matches!(b.get(v), Some(b' ' | b'\t')) {
        v += 1;
    }
    let (s, e) = match b.get(v) {
        Some(&q @ (b'"' | b'\'')) => {
            let s = v + 1;
            let e = b[s..]
                .iter()
                .position(|&c| c == q || c == b'\n')
                .map_or(b.len(), |p| s + p);
            (s, e)
        }
        Some(_) => {
            let e = b[v..]
                .iter()
                .position(|&c| is_value_end(c))
                .map_or(b.len(), |p| v + p);
            (v, e)
        }
        None => return None,
    };
    let value = &b[s..e];
    (value.len() >= 8 && value[0] != b'$' && value[0] != b'`').then_some((s, e))
}

/// `KEY=value`, `KEY = value`, `"key": "value"`, `Key: value` with a secret-ish key name.
fn scan_assignments(b: &[u8], out: &mut Vec<(usize, usize)>) {
    for p in 0..b.len() {
        let sep = b[p];
        if sep != b'=' && sep != b':' {
            continue;
        }
        if sep == b'=' && b.get(p + 1) == Some(&b'=') {
            continue;
        }
        let mut k = p;
        while k > 0 && matches!(b[k - 1], b' ' | b'\t') {
            k -= 1;
        }
        let quoted_key = k > 0 && matches!(b[k - 1], b'"' | b'\'');
        if quoted_key {
            k -= 1;
        }
        let key_end = k;
        while k > 0 && is_key_char(b[k - 1]) {
            k -= 1;
        }
        if k == key_end || !is_secret_key(&b[k..key_end]) {
            continue;
        }
        if sep == b':' && !quoted_key && !matches!(b.get(p + 1), Some(b' ' | b'\t')) {
            continue;
        }
        if let Some(range) = value_at(b, p + 1) {
            out.push(range);
        }
    }
}

/// `--password VALUE`, `--api-key VALUE` and the like.
fn scan_flag_values(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'-' || (i > 0 && !matches!(b[i - 1], b' ' | b'\t' | b'"' | b'\'')) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j] == b'-' {
            j += 1;
        }
        let name_start = j;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'_' | b'-')) {
            j += 1;
        }
        if j > name_start
            && matches!(b.get(j), Some(b' ' | b'\t'))
            && is_secret_key(&b[name_start..j])
        {
            let mut v = j;
            while matches!(b.get(v), Some(b' ' | b'\t')) {
                v += 1;
            }
            if b.get(v) != Some(&b'-')
                && let Some(range) = value_at(b, v)
            {
                out.push(range);
            }
        }
        i = j.max(i + 1);
    }
}

/// `scheme://user:password@host`: the password.
fn scan_url_credentials(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let mut i = 0;
    while let Some(p) = find(b, i, b"://") {
        let a = p + 3;
        let end = b[a..]
            .iter()
            .position(|&c| {
                c.is_ascii_whitespace()
                    || matches!(c, b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>' | b'`')
            })
            .map_or(b.len(), |q| a + q);
        let authority = &b[a..end];
        if let Some(at) = authority.iter().rposition(|&c| c == b'@')
            && let Some(colon) = authority[..at].iter().position(|&c| c == b':')
        {
            let (s, e) = (a + colon + 1, a + at);
            if e > s && b[s] != b'$' {
                out.push((s, e));
            }
        }
        i = end.max(a);
    }
}

/// `Bearer <token>` (HTTP authorization headers).
fn scan_bearer(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let lower = b.to_ascii_lowercase();
    let mut i = 0;
    while let Some(p) = find(&lower, i, b"bearer ") {
        i = p + 7;
        if p > 0 && lower[p - 1].is_ascii_alphanumeric() {
            continue;
        }
        let mut s = p + 7;
        while matches!(b.get(s), Some(b' ' | b'\t')) {
            s += 1;
        }
        let run = b[s..]
            .iter()
            .take_while(|&&c| {
                c.is_ascii_alphanumeric()
                    || matches!(c, b'.' | b'_' | b'~' | b'+' | b'/' | b'=' | b'-')
            })
            .count();
        if run >= 16 {
            out.push((s, s + run));
        }
    }
}
