//! Secrets inside URLs: the password of `scheme://user:password@host` and secret-named query
//! parameters (`?access_token=...`, `&X-Amz-Signature=...`).

use super::super::text::find;
use super::{NameKind, is_secret_name};

/// `scheme://user:password@host`: the password.
pub(super) fn scan_url_credentials(b: &[u8], out: &mut Vec<(usize, usize)>) {
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

/// `?name=value&...` where the name says secret (`token`, `access_token`, `api_key`, `key`,
/// `X-Amz-Signature`, `sig`, ...): the value, up to the next `&`, `#` or end of the word.
pub(super) fn scan_query_params(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let word_end = |c: u8| {
        c.is_ascii_whitespace()
            || matches!(c, b'"' | b'\'' | b'<' | b'>' | b'`' | b'(' | b')' | b'|')
    };
    let mut i = 0;
    while let Some(q) = b.get(i..).and_then(|r| r.iter().position(|&c| c == b'?')) {
        let mut p = i + q + 1;
        let end = b[p..]
            .iter()
            .position(|&c| word_end(c) || c == b'#')
            .map_or(b.len(), |e| p + e);
        while p < end {
            let piece_end = b[p..end]
                .iter()
                .position(|&c| matches!(c, b'&' | b';'))
                .map_or(end, |e| p + e);
            let piece = &b[p..piece_end];
            if let Some(eq) = piece.iter().position(|&c| c == b'=') {
                let (vs, ve) = (p + eq + 1, piece_end);
                if eq > 0
                    && ve > vs
                    && b[vs] != b'$'
                    && is_secret_name(&piece[..eq], NameKind::Query)
                {
                    out.push((vs, ve));
                }
            }
            p = piece_end + 1;
        }
        i = end.max(i + q + 1);
    }
}
