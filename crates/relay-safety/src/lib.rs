//! Fail-closed safety checks for the shell command lines that `POST /v1/suggest` proposes.
//!
//! Relay's `POST /v1/suggest` completes a partial command line typed into an AI coding terminal. Before
//! a completion leaves the service it goes through [`check_completion`] (or [`check_command`] for a
//! whole line). The check parses the line with a small shell-word tokenizer of its own (quotes,
//! escapes, `$(...)`, backticks, `<(...)`, `${...}`, `$'...'`, comments, brace expansion), splits
//! it into simple commands on `;`, `&&`, `||`, `|`, `&` and newlines, looks through wrappers
//! (`sudo`, `env`, `nohup`, `nice`, `timeout`, `xargs`, `watch`, `bash -c`, `ssh host CMD`, ...)
//! and checks every nested command line recursively. It refuses recursive deletes of roots, raw
//! device writes, fork bombs, downloads fed to interpreters, destructive git, infrastructure and
//! SQL commands, power commands, and any line that carries a secret.
//!
//! The rule this crate keeps is **fail closed**: whatever it cannot parse or fully understand
//! (unbalanced quotes or parentheses, control characters, lines over 1,000 bytes, nesting deeper
//! than 16 levels, command names produced by command substitution, `case` statements) is refused,
//! never allowed. Checking is linear-ish in the input size and never panics.
//!
//! [`looks_like_secret`] and [`redact_secrets`] recognise credential-shaped text (cloud keys, VCS
//! and registry tokens, private key blocks, `password=...` style assignments) with small
//! hand-written scanners, so text can be scrubbed before it is logged or sent on.
//!
//! The crate is pure (no I/O, no dependencies), so the fuzz targets and clients can use it without
//! the server.

mod args;
mod lexer;
mod parser;
mod resolve;
mod rules;
mod scan;
mod secrets;
mod text;
mod walk;

#[cfg(test)]
mod tests;

use parser::SpanMap;
use resolve::is_elevation;
use secrets::{merge_ranges, secret_ranges};
use text::{is_forbidden_char, is_fork_bomb_shape};
use walk::Walker;

use reason::*;

/// The outcome of a safety check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing harmful was found.
    Allow,
    /// Refused; the reason names the rule that fired.
    Refuse(&'static str),
}

/// Longest line checked at all; longer lines are refused.
const MAX_LINE_BYTES: usize = 1000;
/// Deepest nesting of substitutions, subshells, groups and `sh -c` scripts.
const MAX_DEPTH: usize = 16;
/// Most words one simple command may have after brace expansion.
const MAX_ARGS: usize = 256;
/// Most bytes one simple command may have after brace expansion.
const MAX_EXPANDED_BYTES: usize = 4 * MAX_LINE_BYTES;
/// Most bytes of command text (top level plus derived scripts) parsed per check.
const MAX_WORK_BYTES: usize = 64 * MAX_LINE_BYTES;

/// The reasons carried by [`Verdict::Refuse`], one per rule.
pub mod reason {
    /// The line is longer than 1,000 bytes.
    pub const TOO_LONG: &str = "line longer than 1000 bytes";
    /// A control character (other than tab) or an invisible/bidi formatting character.
    pub const CONTROL: &str = "control or invisible character";
    /// Unbalanced quotes or parentheses, or syntax this checker does not understand.
    pub const UNPARSEABLE: &str = "unparseable";
    /// More than 16 levels of nesting.
    pub const TOO_DEEP: &str = "nesting too deep";
    /// Derived scripts (brace expansion, `eval`, `sh -c`) add up to too much text.
    pub const TOO_COMPLEX: &str = "too complex to check";
    /// Brace expansion produces too many or too long words.
    pub const BRACE: &str = "brace expansion too large";
    /// A secret-shaped token appears in the line.
    pub const SECRET: &str = "contains a secret";
    /// `DROP DATABASE|TABLE|SCHEMA`, `TRUNCATE` or `dropdb`.
    pub const SQL: &str = "destructive SQL";
    /// Recursive `rm` of a root, home, the working directory, a system dir or a variable path.
    pub const RM_ROOT: &str = "recursive rm on a root or dangerous path";
    /// `--no-preserve-root`.
    pub const NO_PRESERVE_ROOT: &str = "rm --no-preserve-root";
    /// `find` deleting everything under a root or the working directory.
    pub const FIND_DELETE: &str = "find deleting from a root";
    /// A write to a block device (`dd of=`, redirection, `tee`, `cp`).
    pub const DEVICE_WRITE: &str = "write to a raw device";
    /// `mkfs*`, `wipefs`, or `shred`/partitioning tools on a device.
    pub const DEVICE_TOOL: &str = "filesystem or partition tool on a device";
    /// A function that calls itself (the `:(){ :|:& };:` shape).
    pub const FORK_BOMB: &str = "fork bomb";
    /// `curl ... | sh` and friends.
    pub const DOWNLOAD_PIPE: &str = "download piped into an interpreter";
    /// `bash <(curl ...)`, `sh -c "$(curl ...)"`, `eval "$(wget ...)"`.
    pub const DOWNLOAD_EXEC: &str = "download executed by an interpreter";
    /// Anything piped into a shell that reads its script from stdin (`... | sudo sh`).
    pub const PIPE_SHELL: &str = "input piped into a shell";
    /// The command name comes from `$(...)`/backticks or has an expansion after its start.
    pub const DYNAMIC_COMMAND: &str = "command name from a substitution or expansion";
    /// `$IFS` used to split words (`rm${IFS}-rf${IFS}/`).
    pub const IFS_SPLITTING: &str = "word splitting through $IFS";
    /// `nc -e /bin/sh ...` and friends.
    pub const REVERSE_SHELL: &str = "reverse shell";
    /// `chmod|chown|chgrp -R` on a root, home or system dir.
    pub const PERM_ROOT: &str = "recursive permission change on a root";
    /// `chmod 777`, `a+rwx`, `o+w` and other world-writable modes.
    pub const WORLD_WRITABLE: &str = "world-writable chmod";
    /// `git -c ...` / `--config-env` before the subcommand.
    pub const GIT_CONFIG: &str = "git -c config injection";
    /// `git push --force`, `-f` in any cluster, `+refspec`.
    pub const GIT_FORCE_PUSH: &str = "git force push";
    /// `git push --delete`, `-d`, `:ref`, `--mirror`, `--prune`.
    pub const GIT_PUSH_DELETE: &str = "git push deleting remote refs";
    /// `git reset --hard`.
    pub const GIT_RESET_HARD: &str = "git reset --hard";
    /// `git clean` with force, or without `-n`/`-i`.
    pub const GIT_CLEAN: &str = "git clean";
    /// `git checkout .`, `git checkout -- .`, `git checkout -f`, `git restore .`, `git switch -f`.
    pub const GIT_DISCARD: &str = "git discarding working-tree changes";
    /// `git branch -D` or `--delete --force`.
    pub const GIT_BRANCH_DELETE: &str = "git branch force delete";
    /// `git stash drop` / `git stash clear`.
    pub const GIT_STASH: &str = "git stash drop or clear";
    /// `git filter-branch` / `git filter-repo`.
    pub const GIT_REWRITE: &str = "git history rewrite";
    /// `git reflog expire|delete`, `git gc --prune=...`, `git prune`.
    pub const GIT_PRUNE: &str = "git reflog expire or prune";
    /// `terraform destroy`, `terraform apply -destroy`, `pulumi destroy`, `cdk destroy`.
    pub const INFRA_DESTROY: &str = "infrastructure destroy";
    /// `kubectl delete`.
    pub const KUBE_DELETE: &str = "kubectl delete";
    /// `helm uninstall` / `helm delete`.
    pub const HELM_UNINSTALL: &str = "helm uninstall";
    /// `shutdown`, `reboot`, `halt`, `poweroff`, `init 0|6`, `systemctl poweroff|reboot|halt`.
    pub const POWER: &str = "shutdown, reboot or halt";
    /// `kill -9 -1`, `killall5`.
    pub const KILL_ALL: &str = "kill every process";
    /// `perl -e`, `python -c`, `node -e`, `ruby -e`, `php -r` code that deletes or overwrites
    /// files, runs a shell command this check refuses, or builds what it runs at run time.
    pub const INTERPRETER: &str =
        "interpreter one-liner that deletes, overwrites or runs unseen code";
    /// `> /etc/...`, `>> /usr/...`, `tee /boot/...`: a write onto a system file.
    pub const SYSTEM_FILE_WRITE: &str = "write onto a system file";
    /// `rm`, `shred`, `find -delete` of `~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.kube` and the like.
    pub const CREDENTIAL_DELETE: &str = "deletes credentials";
    /// A credential file uploaded, copied to a host, or piped into a network client.
    pub const CREDENTIAL_EXFIL: &str = "credential file sent over the network";
    /// `mv /`, `mv /etc ...`, `mv /usr/* ...`, `mv ~ ...`.
    pub const MOVE_ROOT: &str = "moves a root or top-level system folder";
    /// `crontab -r`.
    pub const CRONTAB_REMOVE: &str = "crontab -r";
    /// `iptables -F`, `nft flush ruleset`, `ufw disable|reset`, stopping the firewall service.
    pub const FIREWALL: &str = "firewall flush or disable";
    /// [`super::check_completion`]: the completion is not a strict extension of the partial.
    pub const NOT_EXTENDING: &str = "does not extend the partial";
    /// [`super::check_completion`]: the completion spans more than one line.
    pub const MULTI_LINE: &str = "multi-line completion";
    /// [`super::check_completion`]: the completion adds `sudo`/`doas`/`su`/`pkexec`.
    pub const ELEVATION: &str = "completion introduces privilege escalation";
}

/// Checks a full, completed command line (not just the part a completion added).
///
/// Refuses (fails closed) on anything harmful or anything it cannot parse; see the module docs.
pub fn check_command(line: &str) -> Verdict {
    if let Some(r) = line_refusal(line) {
        return Verdict::Refuse(r);
    }
    let mut walker = Walker::default();
    walker.check_text(line, SpanMap::Offset(0), 0);
    walker.verdict()
}

/// Checks a completion of what the user typed.
///
/// `completed` must strictly extend `partial` (byte-exact prefix, longer), must be a single line
/// without control characters, must not introduce `sudo`, `doas`, `su`, `pkexec` (or `sudoedit`,
/// `run0`) as a command word the user did not type themselves, and must pass [`check_command`].
/// An elevation command word counts as typed only when it lies entirely within `partial`.
pub fn check_completion(partial: &str, completed: &str) -> Verdict {
    if completed.len() <= partial.len() || !completed.starts_with(partial) {
        return Verdict::Refuse(NOT_EXTENDING);
    }
    if completed.contains(['\n', '\r']) {
        return Verdict::Refuse(MULTI_LINE);
    }
    if let Some(r) = line_refusal(completed) {
        return Verdict::Refuse(r);
    }
    let mut walker = Walker::default();
    walker.check_text(completed, SpanMap::Offset(0), 0);
    let typed = partial.len();
    let introduced = walker
        .cmd_words
        .iter()
        .any(|(name, span)| is_elevation(name) && span.1 > typed);
    if introduced {
        return Verdict::Refuse(ELEVATION);
    }
    walker.verdict()
}

/// Whether `text` contains anything shaped like a credential.
pub fn looks_like_secret(text: &str) -> bool {
    !secret_ranges(text).is_empty()
}

/// Replaces each secret-shaped part of `text` with `[REDACTED]`, leaving the rest intact.
///
/// For assignments (`password=...`, `--token VALUE`, `api_key: ...`) only the value is replaced.
pub fn redact_secrets(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut pos = 0;
    for (start, end) in merge_ranges(secret_ranges(text)) {
        out.extend_from_slice(bytes.get(pos..start).unwrap_or_default());
        out.extend_from_slice(b"[REDACTED]");
        pos = end;
    }
    out.extend_from_slice(bytes.get(pos..).unwrap_or_default());
    String::from_utf8_lossy(&out).into_owned()
}

fn line_refusal(line: &str) -> Option<&'static str> {
    if line.len() > MAX_LINE_BYTES {
        return Some(TOO_LONG);
    }
    if line.chars().any(is_forbidden_char) {
        return Some(CONTROL);
    }
    if looks_like_secret(line) {
        return Some(SECRET);
    }
    if is_fork_bomb_shape(line) {
        return Some(FORK_BOMB);
    }
    None
}
