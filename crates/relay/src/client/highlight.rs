//! Code in a fenced Markdown block coloured by its language: syntect's parser with the Sublime
//! Text grammars it ships (Rust, Python, JavaScript, TypeScript, shell, Go, C, SQL, …), each
//! token's scope mapped to one of the terminal's own 16 colours, so the user's palette and
//! background decide how it looks (a theme's 24-bit colours would ignore both). The grammars are
//! loaded the first time a block names a language known to them, once a session.

use std::sync::{Arc, OnceLock};

use syntect::easy::ScopeRangeIterator;
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxSet};

/// Scope prefixes and their SGR colour, the most specific first; a token takes the colour of its
/// innermost scope that has one (a string's quotes are `punctuation…` inside `string…`); an
/// empty colour is the terminal's own (operators inside a keyword scope).
const COLOURS: &[(&str, &str)] = &[
    ("comment", "2"),
    ("string", "32"),
    ("constant.character.escape", "35"),
    ("constant", "35"),
    ("entity.name.function", "33"),
    ("support.function", "33"),
    ("variable.function", "33"),
    ("entity.name", "36"),
    ("support.type", "36"),
    ("storage.type", "36"),
    ("keyword.operator", ""),
    ("keyword", "34"),
    ("storage", "34"),
    ("support.macro", "33"),
];

struct Loaded {
    set: SyntaxSet,
    colours: Vec<(Scope, &'static str)>,
}

/// The grammars, shared by the session's answers and loaded on first use.
#[derive(Clone, Default)]
pub struct Grammars(Arc<OnceLock<Loaded>>);

impl Grammars {
    fn loaded(&self) -> &Loaded {
        self.0.get_or_init(|| Loaded {
            set: SyntaxSet::load_defaults_newlines(),
            colours: COLOURS
                .iter()
                .filter_map(|(s, c)| Scope::new(s).ok().map(|s| (s, *c)))
                .collect(),
        })
    }

    /// A block opened by a fence whose info string is `info` (```` ```rust ````, ```` ```py title ````);
    /// `None` for no language or one the grammars do not know.
    pub fn block(&self, info: &str) -> Option<Block> {
        let lang = info
            .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
            .next()
            .filter(|l| !l.is_empty())?;
        let syntax = self.loaded().set.find_syntax_by_token(lang)?;
        Some(Block {
            grammars: self.clone(),
            state: ParseState::new(syntax),
            stack: ScopeStack::new(),
        })
    }
}

/// One fenced block being highlighted: the parser's state runs from line to line, so a string or
/// comment that spans lines keeps its colour.
pub struct Block {
    grammars: Grammars,
    state: ParseState,
    stack: ScopeStack,
}

impl Block {
    /// `line` (already escaped, without its line end) with colours. A line the grammar cannot
    /// parse is shown as it is.
    pub fn line(&mut self, line: &str) -> String {
        let loaded = self.grammars.loaded();
        let with_end = format!("{line}\n");
        let Ok(ops) = self.state.parse_line(&with_end, &loaded.set) else {
            return line.to_owned();
        };
        let mut out = String::with_capacity(line.len() * 2);
        // The colour in effect, so neighbouring tokens of one colour share one sequence.
        let mut open: Option<&str> = None;
        for (range, op) in ScopeRangeIterator::new(&ops, &with_end) {
            if self.stack.apply(op).is_err() {
                return line.to_owned();
            }
            let piece = with_end[range].trim_end_matches('\n');
            if piece.is_empty() {
                continue;
            }
            let code = colour(&self.stack, &loaded.colours).filter(|c| !c.is_empty());
            if code != open {
                if open.is_some() {
                    out.push_str("\x1b[0m");
                }
                if let Some(c) = code {
                    out.push_str(&format!("\x1b[{c}m"));
                }
                open = code;
            }
            out.push_str(piece);
        }
        if open.is_some() {
            out.push_str("\x1b[0m");
        }
        out
    }
}

fn colour(stack: &ScopeStack, colours: &[(Scope, &'static str)]) -> Option<&'static str> {
    stack.as_slice().iter().rev().find_map(|scope| {
        colours
            .iter()
            .find(|(prefix, _)| prefix.is_prefix_of(*scope))
            .map(|(_, c)| *c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_is_coloured_by_token_and_keeps_its_text() {
        let g = Grammars::default();
        let mut b = g.block("rust").unwrap();
        let out = b.line("fn main() { let s = \"hi\"; } // done");
        assert!(
            out.starts_with("\x1b[36mfn\x1b[0m \x1b[33mmain\x1b[0m"),
            "{out:?}"
        );
        assert!(out.contains("\x1b[32m\"hi\"\x1b[0m"), "a string: {out:?}");
        assert!(out.contains("\x1b[2m// done\x1b[0m"), "{out:?}");
        let plain: String = out
            .split('\x1b')
            .enumerate()
            .map(|(i, p)| {
                if i == 0 {
                    p
                } else {
                    p.split_once('m').map_or("", |x| x.1)
                }
            })
            .collect();
        assert_eq!(plain, "fn main() { let s = \"hi\"; } // done");
    }

    #[test]
    fn state_runs_across_lines_and_unknown_languages_are_none() {
        let g = Grammars::default();
        let mut b = g.block("python title=x.py").unwrap();
        b.line("s = \"\"\"opened");
        assert!(b.line("still a string").starts_with("\x1b[32m"));
        assert!(g.block("no-such-language").is_none());
        assert!(g.block("").is_none());
    }
}
