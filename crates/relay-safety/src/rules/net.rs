//! Downloads fed to interpreters: downloaders, interpreters and stdin shells in commands.

use super::super::MAX_DEPTH;
use super::super::args::plain_args;
use super::super::parser::{Cmd, Redir, Script, SpanMap, parse};
use super::super::resolve::{is_downloader, is_interpreter, resolve};

pub(crate) fn cmd_has_downloader(c: &Cmd, depth: usize) -> bool {
    match c {
        Cmd::Simple { words, redirs } => {
            let r = resolve(&plain_args(words));
            r.chain.iter().any(|(n, _)| is_downloader(n))
                || words
                    .iter()
                    .any(|w| w.subs.iter().any(|s| script_has_downloader(s, depth + 1)))
                || redirs_have_downloader(redirs, depth)
                || r.scripts
                    .iter()
                    .any(|(text, _)| text_has_downloader(text, depth + 1))
        }
        Cmd::Compound { body, redirs } => {
            script_has_downloader(body, depth) || redirs_have_downloader(redirs, depth)
        }
        Cmd::Function { body, .. } => script_has_downloader(body, depth),
    }
}

pub(crate) fn redirs_have_downloader(redirs: &[Redir], depth: usize) -> bool {
    redirs.iter().any(|rd| {
        rd.target
            .subs
            .iter()
            .any(|s| script_has_downloader(s, depth + 1))
    })
}

pub(crate) fn script_has_downloader(s: &Script, depth: usize) -> bool {
    s.iter().flatten().any(|c| cmd_has_downloader(c, depth))
}

fn text_has_downloader(text: &str, depth: usize) -> bool {
    // Too deep or unparseable text is refused by the walker itself, with that reason.
    depth <= MAX_DEPTH
        && parse(text.as_bytes(), SpanMap::Fixed(0, 0), depth)
            .is_ok_and(|s| script_has_downloader(&s, depth))
}

pub(crate) fn cmd_is_interpreter(c: &Cmd) -> bool {
    match c {
        Cmd::Simple { words, .. } => resolve(&plain_args(words))
            .chain
            .iter()
            .any(|(n, _)| is_interpreter(n)),
        Cmd::Compound { body, .. } => body.iter().flatten().any(cmd_is_interpreter),
        Cmd::Function { .. } => false,
    }
}

/// Whether an output process substitution `>(...)` hands its input to an interpreter.
pub(crate) fn feeds_interpreter(subs: &[Script]) -> bool {
    subs.iter()
        .flatten()
        .filter_map(|p| p.first())
        .any(|c| cmd_is_interpreter(c) || cmd_reads_stdin_shell(c))
}

pub(crate) fn cmd_reads_stdin_shell(c: &Cmd) -> bool {
    match c {
        Cmd::Simple { words, .. } => resolve(&plain_args(words)).shell_stdin,
        Cmd::Compound { body, .. } => body.iter().flatten().any(cmd_reads_stdin_shell),
        Cmd::Function { .. } => false,
    }
}
