//! Delimiter scanning for the tokenizer: where quotes, substitutions and redirection operators end.

use super::MAX_DEPTH;
use super::parser::RedirOp;
use super::reason::{TOO_DEEP, UNPARSEABLE};

pub(super) fn find_byte(b: &[u8], from: usize, x: u8) -> Result<usize, &'static str> {
    b.get(from..)
        .and_then(|rest| rest.iter().position(|&c| c == x))
        .map(|p| p + from)
        .ok_or(UNPARSEABLE)
}

/// Index of the `)` closing a `$(`, `<(` or `>(` whose contents start at `i`.
pub(super) fn find_close(b: &[u8], mut i: usize, depth: usize) -> Result<usize, &'static str> {
    if depth >= MAX_DEPTH {
        return Err(TOO_DEEP);
    }
    let mut level = 1usize;
    let mut word_start = true;
    while i < b.len() {
        let c = b[i];
        let mut next_word_start = false;
        match c {
            b'\\' => i += 1,
            b'\'' => i = find_byte(b, i + 1, b'\'')?,
            b'"' => i = skip_dquote(b, i + 1, depth)?,
            b'`' => i = skip_backtick(b, i + 1)?,
            b'#' if word_start => {
                while i + 1 < b.len() && b[i + 1] != b'\n' {
                    i += 1;
                }
            }
            b'(' => {
                level += 1;
                next_word_start = true;
            }
            b')' => {
                level -= 1;
                if level == 0 {
                    return Ok(i);
                }
            }
            b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' => next_word_start = true,
            _ => {}
        }
        word_start = next_word_start;
        i += 1;
    }
    Err(UNPARSEABLE)
}

/// Index of the `"` closing a double-quoted string whose contents start at `i`.
pub(super) fn skip_dquote(b: &[u8], mut i: usize, depth: usize) -> Result<usize, &'static str> {
    while i < b.len() {
        match b[i] {
            b'"' => return Ok(i),
            b'\\' => i += 2,
            b'$' if b.get(i + 1) == Some(&b'(') => i = find_close(b, i + 2, depth + 1)? + 1,
            b'`' => i = skip_backtick(b, i + 1)? + 1,
            _ => i += 1,
        }
    }
    Err(UNPARSEABLE)
}

/// Index of the backtick closing a backtick substitution whose contents start at `i`.
pub(super) fn skip_backtick(b: &[u8], mut i: usize) -> Result<usize, &'static str> {
    while i < b.len() {
        match b[i] {
            b'`' => return Ok(i),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    Err(UNPARSEABLE)
}

pub(super) fn redir_op(b: &[u8], i: usize) -> (RedirOp, usize) {
    if b.get(i) == Some(&b'<') {
        match (b.get(i + 1), b.get(i + 2)) {
            (Some(b'<'), Some(b'<')) => (RedirOp::HereString, i + 3),
            (Some(b'<'), Some(b'-')) => (RedirOp::HereDoc, i + 3),
            (Some(b'<'), _) => (RedirOp::HereDoc, i + 2),
            (Some(b'&'), _) => (RedirOp::DupIn, i + 2),
            (Some(b'>'), _) => (RedirOp::Write, i + 2),
            _ => (RedirOp::Read, i + 1),
        }
    } else {
        match b.get(i + 1) {
            Some(b'>' | b'|') => (RedirOp::Write, i + 2),
            Some(b'&') => (RedirOp::DupOut, i + 2),
            _ => (RedirOp::Write, i + 1),
        }
    }
}

/// The value of one hexadecimal digit (0 for anything else; callers check the digit first).
pub(super) fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}
