//! Secret detection: credential-shaped tokens, private keys and `password=...` assignments.
//!
//! Each scanner finds one family and reports byte ranges to redact; overlapping ranges merge.
//! Shell-level families (secret-named variables, client password flags) live in `commands`, URL
//! userinfo and secret query parameters in `urls`.

mod commands;
mod urls;

use super::text::find;

#[derive(Clone, Copy)]
enum Class {
    UpperNum,
    AlNum,
    Word,
    WordDash,
    AlNumDash,
    WordDashDot,
}

impl Class {
    fn has(self, c: u8) -> bool {
        match self {
            Class::UpperNum => c.is_ascii_uppercase() || c.is_ascii_digit(),
            Class::AlNum => c.is_ascii_alphanumeric(),
            Class::Word => c.is_ascii_alphanumeric() || c == b'_',
            Class::WordDash => c.is_ascii_alphanumeric() || c == b'_' || c == b'-',
            Class::AlNumDash => c.is_ascii_alphanumeric() || c == b'-',
            Class::WordDashDot => c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'),
        }
    }
}

/// Prefix, body character class, minimum body length. Longer prefixes first.
const TOKEN_SHAPES: &[(&[u8], Class, usize)] = &[
    (b"github_pat_", Class::Word, 22),
    (b"AGE-SECRET-KEY-1", Class::UpperNum, 50),
    (b"dop_v1_", Class::AlNum, 64),
    (b"doo_v1_", Class::AlNum, 64),
    (b"dor_v1_", Class::AlNum, 64),
    (b"whsec_", Class::AlNum, 24),
    (b"shpat_", Class::AlNum, 32),
    (b"shpss_", Class::AlNum, 32),
    (b"shpca_", Class::AlNum, 32),
    (b"shppa_", Class::AlNum, 32),
    (b"glptt-", Class::WordDash, 20),
    (b"gldt-", Class::WordDash, 20),
    (b"glrt-", Class::WordDash, 20),
    (b"pypi-", Class::WordDash, 50),
    (b"ya29.", Class::WordDash, 20),
    (b"xapp-", Class::AlNumDash, 10),
    (b"AIza", Class::WordDash, 35),
    (b"SG.", Class::WordDashDot, 60),
    (b"hf_", Class::AlNum, 30),
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
    urls::scan_url_credentials(b, &mut out);
    urls::scan_query_params(b, &mut out);
    commands::scan_secret_variables(b, &mut out);
    commands::scan_client_passwords(b, &mut out);
    commands::scan_password_flags(b, &mut out);
    scan_jwts(b, &mut out);
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

/// Where a name is met, which decides the words that mark it as naming a secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum NameKind {
    /// A shell or environment variable (`DB_PASSWORD=...`).
    Variable,
    /// A long command-line option (`--password=...`): `key` and `pass` mean other things there.
    Flag,
    /// A URL query parameter (`?access_token=...`).
    Query,
}

/// Whether `name` names a secret: it ends in `password`, `passwd`, `passphrase`, `secret`,
/// `token`, `credential(s)` or `apikey` (any case, joined or not), or its last word (split at
/// `_`, `-`, `.` and lower-to-upper case changes) is one the kind adds: `key`, `auth`, `pass`,
/// `pwd` (never the whole name: `PWD` is the working directory), and `sig`/`signature` in queries.
pub(super) fn is_secret_name(name: &[u8], kind: NameKind) -> bool {
    const ANY_SUFFIX: &[&[u8]] = &[
        b"password",
        b"passwd",
        b"passphrase",
        b"secret",
        b"token",
        b"credentials",
        b"credential",
        b"apikey",
    ];
    let lower = name.to_ascii_lowercase();
    if ANY_SUFFIX.iter().any(|s| lower.ends_with(s)) {
        return true;
    }
    let start = last_word_start(name);
    let word = &lower[start..];
    match kind {
        NameKind::Flag => word == b"auth",
        NameKind::Variable | NameKind::Query => {
            matches!(word, b"key" | b"auth" | b"pass")
                || (word == b"pwd" && start > 0)
                || (kind == NameKind::Query && matches!(word, b"sig" | b"signature"))
        }
    }
}

fn last_word_start(name: &[u8]) -> usize {
    let mut i = name.len();
    while i > 0 {
        let c = name[i - 1];
        if matches!(c, b'_' | b'-' | b'.') {
            return i;
        }
        if i < name.len()
            && name[i].is_ascii_uppercase()
            && (c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            return i;
        }
        i -= 1;
    }
    0
}

/// `eyJ...` header, a dot, a payload and an optional signature: a JSON Web Token.
fn scan_jwts(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let b64url = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-');
    let mut i = 0;
    while let Some(p) = find(b, i, b"eyJ") {
        i = p + 3;
        if p > 0 && (b64url(&b[p - 1]) || b[p - 1] == b'.') {
            continue;
        }
        let header = b[p..].iter().take_while(|c| b64url(c)).count();
        let mut end = p + header;
        if header < 10 || b.get(end) != Some(&b'.') {
            continue;
        }
        let payload = b[end + 1..].iter().take_while(|c| b64url(c)).count();
        if payload < 2 {
            continue;
        }
        end += 1 + payload;
        if b.get(end) == Some(&b'.') {
            end += 1 + b[end + 1..].iter().take_while(|c| b64url(c)).count();
        }
        out.push((p, end));
        i = end;
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
fn value_at(b: &[u8], v: usize) -> Option<(usize, usize)> {
    literal_at(b, v, 8)
}

/// The value starting at `v` (after optional blanks): the inside of its quotes, or a run up to a
/// shell delimiter; only if it has `min` bytes or more (at least one) and is not a `$` or
/// backtick reference to something else.
fn literal_at(b: &[u8], mut v: usize, min: usize) -> Option<(usize, usize)> {
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
    (value.len() >= min.max(1) && value[0] != b'$' && value[0] != b'`').then_some((s, e))
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
