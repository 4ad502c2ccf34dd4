//! The arguments of a simple command: words after brace expansion, within the limits.

use super::parser::{Script, Word};
use super::{MAX_ARGS, MAX_EXPANDED_BYTES};

/// One argument of a simple command after brace expansion.
pub(super) struct Arg<'a> {
    pub(super) value: String,
    pub(super) span: (usize, usize),
    pub(super) lead: bool,
    /// Contains an expansion outside double quotes.
    pub(super) split: bool,
    /// Starts with an output process substitution `>(...)`.
    pub(super) feeds: bool,
    pub(super) subs: &'a [Script],
    /// Index of the word it came from.
    pub(super) word: usize,
}

pub(super) fn make_args(words: &[Word], expand: bool) -> Option<Vec<Arg<'_>>> {
    let mut out = Vec::with_capacity(words.len());
    let mut bytes = 0usize;
    for (i, w) in words.iter().enumerate() {
        let arg = |value: String| Arg {
            value,
            span: w.span,
            lead: w.lead_expansion,
            split: w.unquoted_expansion,
            feeds: w.value.starts_with(">(") && !w.subs.is_empty(),
            subs: &w.subs,
            word: i,
        };
        if expand && w.brace {
            let mut variants = Vec::new();
            if !brace_expand(&w.value, 0, &mut variants) {
                return None;
            }
            for v in variants {
                bytes += v.len();
                out.push(arg(v));
            }
            if out.len() > words.len() + MAX_ARGS || bytes > MAX_EXPANDED_BYTES {
                return None;
            }
        } else {
            bytes += w.value.len();
            out.push(arg(w.value.clone()));
        }
    }
    Some(out)
}

pub(super) fn plain_args(words: &[Word]) -> Vec<Arg<'_>> {
    make_args(words, false).unwrap_or_default()
}

/// Expands `{a,b}` groups (outermost-leftmost first), in order; false when over the limits.
fn brace_expand(s: &str, depth: usize, out: &mut Vec<String>) -> bool {
    if out.len() > MAX_ARGS {
        return false;
    }
    match split_brace(s) {
        None => {
            out.push(s.to_string());
            out.len() <= MAX_ARGS
        }
        Some(_) if depth >= 32 => false,
        Some((pre, alts, post)) => alts
            .iter()
            .all(|alt| brace_expand(&format!("{pre}{alt}{post}"), depth + 1, out)),
    }
}

type BraceSplit<'a> = (&'a str, Vec<&'a str>, &'a str);

fn split_brace(s: &str) -> Option<BraceSplit<'_>> {
    let b = s.as_bytes();
    let mut stack: Vec<(usize, Vec<usize>, bool)> = Vec::new();
    let mut best: Option<(usize, usize, Vec<usize>)> = None;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'{' => stack.push((i, Vec::new(), i > 0 && b[i - 1] == b'$')),
            b',' => {
                if let Some(top) = stack.last_mut() {
                    top.1.push(i);
                }
            }
            b'}' => {
                if let Some((open, commas, param)) = stack.pop()
                    && !param
                    && !commas.is_empty()
                    && best.as_ref().is_none_or(|(o, _, _)| open < *o)
                {
                    best = Some((open, i, commas));
                }
            }
            _ => {}
        }
    }
    let (open, close, commas) = best?;
    let mut alts = Vec::with_capacity(commas.len() + 1);
    let mut start = open + 1;
    for comma in commas {
        alts.push(s.get(start..comma)?);
        start = comma + 1;
    }
    alts.push(s.get(start..close)?);
    Some((s.get(..open)?, alts, s.get(close + 1..)?))
}
