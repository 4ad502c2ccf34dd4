//! Checks on the raw line before parsing: forbidden characters, fork-bomb shape, bad SQL.

/// Control characters other than tab and newline (newline separates commands), plus invisible
/// and bidirectional formatting characters that make a line read differently from what runs.
pub(super) fn is_forbidden_char(c: char) -> bool {
    (c.is_control() && c != '\t' && c != '\n')
        || matches!(
            c,
            '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2028}'..='\u{2029}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// The `name(){ ... name|name ... }` shape, with or without spaces, found in the raw text.
pub(super) fn is_fork_bomb_shape(line: &str) -> bool {
    let s: Vec<u8> = line.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut from = 0;
    while let Some(at) = find(&s, from, b"(){") {
        let mut k = at;
        while k > 0 && !b";&|(){}<>\"'`".contains(&s[k - 1]) {
            k -= 1;
        }
        let mut name = s.get(k..at).unwrap_or_default();
        if let Some(rest) = name.strip_prefix(b"function")
            && !rest.is_empty()
        {
            name = rest;
        }
        let body_start = at + 3;
        let body = s.get(body_start..).unwrap_or_default();
        let body = &body[..body.iter().position(|&c| c == b'}').unwrap_or(body.len())];
        if !name.is_empty() {
            let mut pattern = name.to_vec();
            pattern.push(b'|');
            pattern.extend_from_slice(name);
            if find(body, 0, &pattern).is_some() {
                return true;
            }
        }
        from = body_start;
    }
    false
}

/// `DROP DATABASE|TABLE|SCHEMA` or `TRUNCATE` as whole words, case-insensitive.
pub(super) fn has_destructive_sql(text: &str) -> bool {
    let b = text.as_bytes();
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut words = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if is_word(b[i]) {
            let start = i;
            while i < b.len() && is_word(b[i]) {
                i += 1;
            }
            words.push((start, i));
        } else {
            i += 1;
        }
    }
    for (idx, &(s, e)) in words.iter().enumerate() {
        let word = &b[s..e];
        if word.eq_ignore_ascii_case(b"truncate") {
            return true;
        }
        if word.eq_ignore_ascii_case(b"drop")
            && let Some(&(ns, ne)) = words.get(idx + 1)
            && b[e..ns].iter().all(u8::is_ascii_whitespace)
            && [&b"database"[..], b"table", b"schema"]
                .iter()
                .any(|k| b[ns..ne].eq_ignore_ascii_case(k))
        {
            return true;
        }
    }
    false
}

pub(super) fn find(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}
