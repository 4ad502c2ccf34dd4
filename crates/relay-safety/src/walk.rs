//! The walker: checks every command of a parsed line, recursing into everything it runs.

use super::args::{Arg, make_args, plain_args};
use super::parser::{Cmd, Redir, RedirOp, Script, SpanMap, Word, parse};
use super::reason::{
    BRACE, CREDENTIAL_EXFIL, DEVICE_WRITE, DOWNLOAD_EXEC, DOWNLOAD_PIPE, DYNAMIC_COMMAND,
    FORK_BOMB, IFS_SPLITTING, PIPE_SHELL, SQL, SYSTEM_FILE_WRITE, TOO_COMPLEX, TOO_DEEP,
};
use super::resolve::{is_shell, prog_name, resolve};
use super::rules::{
    cmd_has_downloader, cmd_is_interpreter, cmd_is_network_client, cmd_reads_credentials,
    cmd_reads_stdin_shell, device_write, feeds_interpreter, redirs_have_downloader,
    script_has_downloader, system_file,
};
use super::text::has_destructive_sql;
use super::{MAX_DEPTH, MAX_WORK_BYTES, Verdict};

#[derive(Default)]
pub(super) struct Walker {
    refusal: Option<&'static str>,
    /// Every command word met, with its span in the top-level line.
    pub(super) cmd_words: Vec<(String, (usize, usize))>,
    work: usize,
}

impl Walker {
    pub(super) fn refuse(&mut self, r: &'static str) {
        if self.refusal.is_none() {
            self.refusal = Some(r);
        }
    }

    pub(super) fn refuse_if(&mut self, cond: bool, r: &'static str) {
        if cond {
            self.refuse(r);
        }
    }

    pub(super) fn verdict(&self) -> Verdict {
        self.refusal.map_or(Verdict::Allow, Verdict::Refuse)
    }

    pub(super) fn check_text(&mut self, text: &str, map: SpanMap, depth: usize) {
        if depth > MAX_DEPTH {
            self.refuse(TOO_DEEP);
            return;
        }
        self.work += text.len();
        if self.work > MAX_WORK_BYTES {
            self.refuse(TOO_COMPLEX);
            return;
        }
        if has_destructive_sql(text) {
            self.refuse(SQL);
        }
        match parse(text.as_bytes(), map, depth) {
            Ok(script) => self.script(&script, depth),
            Err(r) => self.refuse(r),
        }
    }

    fn script(&mut self, s: &Script, depth: usize) {
        for p in s {
            self.pipeline(p, depth);
        }
    }

    fn pipeline(&mut self, p: &[Cmd], depth: usize) {
        for c in p {
            self.cmd(c, depth);
        }
        if p.len() < 2 {
            return;
        }
        let mut download = false;
        let mut credentials = false;
        for (i, c) in p.iter().enumerate() {
            if i > 0 {
                if credentials && cmd_is_network_client(c) {
                    self.refuse(CREDENTIAL_EXFIL);
                }
                if download && cmd_is_interpreter(c) {
                    self.refuse(DOWNLOAD_PIPE);
                }
                if cmd_reads_stdin_shell(c) {
                    self.refuse(PIPE_SHELL);
                }
            }
            credentials |= cmd_reads_credentials(c);
            if !download && cmd_has_downloader(c, depth) {
                download = true;
            }
        }
    }

    fn cmd(&mut self, c: &Cmd, depth: usize) {
        match c {
            Cmd::Simple { words, redirs } => self.simple(words, redirs, depth),
            Cmd::Compound { body, redirs } => {
                self.script(body, depth);
                self.redirs(redirs, depth, false);
            }
            Cmd::Function { name, body } => {
                if script_calls(body, &prog_name(name)) {
                    self.refuse(FORK_BOMB);
                }
                self.script(body, depth);
            }
        }
    }

    fn redirs(&mut self, redirs: &[Redir], depth: usize, herestring_checked: bool) {
        for r in redirs {
            if !(herestring_checked && r.op == RedirOp::HereString) {
                for s in &r.target.subs {
                    self.script(s, depth + 1);
                }
            }
            let t = r.target.value.as_str();
            let writes = match r.op {
                RedirOp::Write => true,
                RedirOp::DupOut => {
                    !(t == "-" || (!t.is_empty() && t.bytes().all(|c| c.is_ascii_digit())))
                }
                RedirOp::Read | RedirOp::DupIn | RedirOp::HereDoc | RedirOp::HereString => false,
            };
            if writes && device_write(t) {
                self.refuse(DEVICE_WRITE);
            }
            if writes && system_file(t) {
                self.refuse(SYSTEM_FILE_WRITE);
            }
        }
    }

    fn simple(&mut self, words: &[Word], redirs: &[Redir], depth: usize) {
        let Some(args) = make_args(words, true) else {
            self.refuse(BRACE);
            return;
        };
        let mut skip = Vec::new();
        let herestring_checked = self.argv(&args, redirs, depth, &mut skip);
        for (i, w) in words.iter().enumerate() {
            if !skip.contains(&i) {
                for s in &w.subs {
                    self.script(s, depth + 1);
                }
            }
        }
        self.redirs(redirs, depth, herestring_checked);
    }

    /// Resolves and checks one argv. Word indices whose text was checked as a derived script are
    /// added to `skip`. Returns whether here-strings were checked as scripts.
    pub(super) fn argv(
        &mut self,
        args: &[Arg<'_>],
        redirs: &[Redir],
        depth: usize,
        skip: &mut Vec<usize>,
    ) -> bool {
        if depth > MAX_DEPTH {
            self.refuse(TOO_DEEP);
            return false;
        }
        let r = resolve(args);
        if args
            .iter()
            .any(|a| a.value.contains("$IFS") || a.value.contains("${IFS"))
        {
            self.refuse(IFS_SPLITTING);
        }
        let feeds_redirect = redirs
            .iter()
            .any(|rd| rd.target.value.starts_with(">(") && feeds_interpreter(&rd.target.subs));
        if feeds_redirect || args.iter().any(|a| a.feeds && feeds_interpreter(a.subs)) {
            self.refuse(PIPE_SHELL);
        }
        for (name, idx) in &r.chain {
            if let Some(a) = args.get(*idx) {
                self.cmd_words.push((name.clone(), a.span));
                // `$(...)` anywhere, or an expansion after the start (`rm${IFS}-rf`), makes the
                // command name unknowable; a leading `$EDITOR` alone is checked as if it were rm.
                if !a.subs.is_empty() || a.value.get(1..).is_some_and(|t| t.contains(['$', '`'])) {
                    self.refuse(DYNAMIC_COMMAND);
                }
            }
        }
        if r.interp_seen {
            let mut seen = Vec::new();
            let mut hit = redirs_have_downloader(redirs, depth);
            for a in args {
                if !seen.contains(&a.word) {
                    seen.push(a.word);
                    hit |= a.subs.iter().any(|s| script_has_downloader(s, depth + 1));
                }
            }
            if hit {
                self.refuse(DOWNLOAD_EXEC);
            }
        }
        skip.extend_from_slice(&r.script_words);
        for (text, span) in &r.scripts {
            self.check_text(text, SpanMap::Fixed(span.0, span.1), depth + 1);
        }
        let mut herestring_checked = false;
        if let Some((name, _)) = &r.prog
            && (is_shell(name) || name == "eval")
            && !r.shell_c
        {
            for rd in redirs.iter().filter(|rd| rd.op == RedirOp::HereString) {
                herestring_checked = true;
                let span = rd.target.span;
                self.check_text(&rd.target.value, SpanMap::Fixed(span.0, span.1), depth + 1);
            }
        }
        if let Some((name, idx)) = &r.prog
            && let Some(prog) = args.get(*idx)
        {
            let rest = args.get(idx + 1..).unwrap_or_default();
            if prog.lead {
                // `$RM -rf /`: a program from a variable may be rm.
                self.rm(rest);
            }
            self.rules(name, rest, depth, skip);
            self.credential_send(name, rest, redirs);
        }
        herestring_checked
    }
}

fn script_calls(s: &Script, name: &str) -> bool {
    s.iter().flatten().any(|c| match c {
        Cmd::Simple { words, .. } => resolve(&plain_args(words))
            .chain
            .iter()
            .any(|(n, _)| n == name),
        Cmd::Compound { body, .. } => script_calls(body, name),
        Cmd::Function { .. } => false,
    })
}
