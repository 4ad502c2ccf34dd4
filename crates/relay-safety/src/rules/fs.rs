//! Filesystem rules: recursive `rm`/`chmod`/`chown` of roots, `find -delete`, raw devices.

use super::super::args::Arg;
use super::super::reason::{
    CREDENTIAL_DELETE, FIND_DELETE, MOVE_ROOT, NO_PRESERVE_ROOT, PERM_ROOT, RM_ROOT, WORLD_WRITABLE,
};
use super::super::resolve::resolve;
use super::super::walk::Walker;
use super::creds::credential_path;
use super::long_matches;

const SYSTEM_DIRS: &[&str] = &[
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "media",
    "mnt",
    "nix",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "snap",
    "srv",
    "sys",
    "usr",
    "var",
    "applications",
    "library",
    "system",
    "users",
    "volumes",
    "private",
    "cores",
];

/// Path components after dropping empty and `.` parts and resolving `..`; the flag says a `..`
/// climbed above the start.
pub(super) fn components(path: &str) -> (Vec<&str>, bool) {
    let mut out = Vec::new();
    let mut escaped = false;
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if out.pop().is_none() {
                    escaped = true;
                }
            }
            _ => out.push(c),
        }
    }
    (out, escaped)
}

/// A component that matches (nearly) everything: `*`, `.*`, `**`, `?*`, `[!.]*`.
fn wildcard_only(c: &str) -> bool {
    let t = c.trim_start_matches('.').as_bytes();
    if t.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < t.len() {
        match t[i] {
            b'*' | b'?' => i += 1,
            b'[' => match t[i..].iter().position(|&x| x == b']') {
                Some(p) => i += p + 1,
                None => return false,
            },
            _ => return false,
        }
    }
    true
}

fn has_glob(c: &str) -> bool {
    c.contains(['*', '?', '[', '{'])
}

pub(super) fn trim_wildcards(comps: &mut Vec<&str>) {
    while comps.last().is_some_and(|c| wildcard_only(c)) {
        comps.pop();
    }
}

/// A target whose recursive removal (or chmod/chown) would be catastrophic.
fn dangerous_target(a: &Arg<'_>) -> bool {
    let v = a.value.as_str();
    if a.lead || v.starts_with('$') || v.starts_with('`') {
        return true;
    }
    if v.is_empty() {
        return false;
    }
    if let Some(rest) = v.strip_prefix('~') {
        let after = rest.find('/').map_or("", |p| &rest[p..]);
        let (mut comps, escaped) = components(after);
        trim_wildcards(&mut comps);
        return comps.is_empty() || escaped;
    }
    let (mut comps, _) = components(v);
    trim_wildcards(&mut comps);
    if v.starts_with('/') {
        comps.len() <= 1
            || comps.iter().take(2).any(|c| has_glob(c))
            || (comps.len() == 2
                && comps
                    .first()
                    .is_some_and(|c| SYSTEM_DIRS.iter().any(|d| d.eq_ignore_ascii_case(c))))
    } else {
        comps.is_empty()
    }
}

/// Top-level folders whose files a write must never replace (`/var`, `/opt`, `/srv` hold
/// application data that people do write).
const SYSTEM_FILE_DIRS: &[&str] = &[
    "etc", "boot", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "sys", "proc", "root",
    "system", "library",
];

/// A path inside a system folder (`/etc/hosts`, `/usr/bin/x`, `/etc/../etc/passwd`).
pub(crate) fn system_file(v: &str) -> bool {
    if !v.starts_with('/') {
        return false;
    }
    let (comps, _) = components(v);
    comps.len() >= 2
        && comps
            .first()
            .is_some_and(|c| SYSTEM_FILE_DIRS.iter().any(|d| d.eq_ignore_ascii_case(c)))
}

/// `/`, a top-level system folder, a glob over the top level, or a home directory itself.
fn top_level(a: &Arg<'_>) -> bool {
    let v = a.value.as_str();
    let home = v
        .strip_prefix('~')
        .map(|r| r.find('/').map_or("", |p| &r[p..]))
        .or_else(|| {
            v.strip_prefix("${HOME}")
                .or_else(|| v.strip_prefix("$HOME"))
        });
    if let Some(rest) = home {
        let (mut comps, _) = components(rest);
        trim_wildcards(&mut comps);
        return comps.is_empty();
    }
    if !v.starts_with('/') {
        return false;
    }
    let (mut comps, _) = components(v);
    trim_wildcards(&mut comps);
    match comps.as_slice() {
        [] => true,
        [one] => has_glob(one) || SYSTEM_DIRS.iter().any(|d| d.eq_ignore_ascii_case(one)),
        _ => false,
    }
}

/// A `/dev/...` path other than the harmless sinks and standard streams.
pub(crate) fn device_write(v: &str) -> bool {
    if !v.starts_with('/') {
        return false;
    }
    let (comps, _) = components(v);
    if comps.first() != Some(&"dev") {
        return false;
    }
    let rest = comps.get(1..).unwrap_or_default().join("/");
    let harmless = matches!(
        rest.as_str(),
        "null" | "zero" | "full" | "stdout" | "stderr" | "stdin" | "tty"
    ) || rest
        .strip_prefix("fd/")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()));
    !harmless
}

/// A short-option cluster ending in `t` (`-ft DIR`), or `-tDIR`.
fn cluster_t(v: &str) -> bool {
    !v.starts_with("--")
        && v.get(1..)
            .is_some_and(|c| c.starts_with('t') || c.ends_with('t'))
}

fn world_writable(mode: &str) -> bool {
    let b = mode.as_bytes();
    if !b.is_empty() && b.iter().all(|c| (b'0'..=b'7').contains(c)) {
        return b.len() <= 4 && b.last().is_some_and(|&d| (d - b'0') & 2 != 0);
    }
    mode.split(',').any(|clause| {
        let who_len = clause.bytes().take_while(|c| b"ugoa".contains(c)).count();
        let who = &clause[..who_len];
        if !(who.contains('o') || who.contains('a')) {
            return false;
        }
        let mut op = 0u8;
        clause.bytes().skip(who_len).any(|c| match c {
            b'+' | b'=' | b'-' => {
                op = c;
                false
            }
            b'w' | b'u' | b'g' => op == b'+' || op == b'=',
            _ => false,
        })
    })
}

impl Walker {
    /// `mv` whose source is `/`, a top-level system folder or a home directory.
    pub(super) fn mv(&mut self, args: &[Arg<'_>]) {
        let mut target_dir = false;
        let mut sources = Vec::new();
        let mut ended = false;
        for a in args {
            let v = a.value.as_str();
            if !ended && v == "--" {
                ended = true;
            } else if !ended && v.starts_with('-') && v.len() > 1 {
                target_dir |= v == "-t" || v.starts_with("--target-directory") || cluster_t(v);
            } else {
                sources.push(a);
            }
        }
        if !target_dir {
            sources.pop();
        }
        self.refuse_if(sources.iter().any(|a| top_level(a)), MOVE_ROOT);
    }

    pub(crate) fn rm(&mut self, args: &[Arg<'_>]) {
        let mut recursive = false;
        let mut ended = false;
        let mut targets = Vec::new();
        for a in args {
            let v = a.value.as_str();
            if !ended && v == "--" {
                ended = true;
                continue;
            }
            if !ended && v.len() > 2 && v.starts_with("--") {
                recursive |= long_matches(v, "--recursive", 3);
                if long_matches(v, "--no-preserve-root", 3) {
                    self.refuse(NO_PRESERVE_ROOT);
                }
                continue;
            }
            if !ended && v.len() > 1 && v.starts_with('-') {
                recursive |= v.contains(['r', 'R']);
                continue;
            }
            targets.push(a);
        }
        // An unquoted expansion may split into more words, `/` among them.
        let splits = args.iter().any(|a| a.split);
        if recursive && (splits || targets.iter().any(|a| dangerous_target(a))) {
            self.refuse(RM_ROOT);
        }
    }

    pub(super) fn perms(&mut self, is_chmod: bool, args: &[Arg<'_>]) {
        let mut recursive = false;
        let mut reference = false;
        let mut ended = false;
        let mut positional: Vec<&Arg<'_>> = Vec::new();
        for a in args {
            let v = a.value.as_str();
            if !ended && v == "--" {
                ended = true;
                continue;
            }
            if !ended && v.starts_with("--") {
                recursive |= long_matches(v, "--recursive", 4);
                reference |= v.starts_with("--reference");
                if long_matches(v, "--no-preserve-root", 4) {
                    self.refuse(PERM_ROOT);
                }
                continue;
            }
            if !ended && v.len() > 1 && v.starts_with('-') {
                let flags: &[u8] = if is_chmod { b"cfvR" } else { b"cfvhHLPR" };
                if v.bytes().skip(1).all(|c| flags.contains(&c)) {
                    recursive |= v.contains('R');
                    continue;
                }
                if !is_chmod {
                    continue;
                }
            }
            positional.push(a);
        }
        let (mode, targets) = if reference {
            (None, positional.as_slice())
        } else {
            (positional.first(), positional.get(1..).unwrap_or_default())
        };
        if is_chmod && mode.is_some_and(|m| world_writable(&m.value)) {
            self.refuse(WORLD_WRITABLE);
        }
        if recursive && targets.iter().any(|a| dangerous_target(a)) {
            self.refuse(PERM_ROOT);
        }
    }

    pub(super) fn find(&mut self, args: &[Arg<'_>], depth: usize, skip: &mut Vec<usize>) {
        let mut i = 0;
        while let Some(a) = args.get(i) {
            match a.value.as_str() {
                "-H" | "-L" | "-P" => i += 1,
                "-D" => i += 2,
                v if v.starts_with("-O") => i += 1,
                _ => break,
            }
        }
        let mut roots = Vec::new();
        while let Some(a) = args.get(i) {
            let v = a.value.as_str();
            if v.starts_with('-') || matches!(v, "(" | "!" | ",") {
                break;
            }
            roots.push(a);
            i += 1;
        }
        let expr = args.get(i..).unwrap_or_default();
        let (mut delete, mut test, mut exec_rm) = (false, false, false);
        let mut j = 0;
        while let Some(a) = expr.get(j) {
            match a.value.as_str() {
                "-delete" => delete = true,
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let start = j + 1;
                    let mut end = start;
                    while expr
                        .get(end)
                        .is_some_and(|x| x.value != ";" && x.value != "+")
                    {
                        end += 1;
                    }
                    let cmd = expr.get(start..end).unwrap_or_default();
                    let r = resolve(cmd);
                    exec_rm |= r
                        .prog
                        .as_ref()
                        .is_some_and(|(n, _)| matches!(n.as_str(), "rm" | "shred" | "unlink"));
                    self.argv(cmd, &[], depth + 1, skip);
                    j = end;
                }
                "-maxdepth" | "-mindepth" => j += 1,
                "-depth"
                | "-d"
                | "-print"
                | "-print0"
                | "-xdev"
                | "-mount"
                | "-follow"
                | "-daystart"
                | "-noleaf"
                | "-ignore_readdir_race"
                | "-noignore_readdir_race" => {}
                v if v.starts_with('-') => test = true,
                _ => {}
            }
            j += 1;
        }
        let root_danger = roots.is_empty() || roots.iter().any(|a| dangerous_target(a));
        if (delete || exec_rm) && !test && root_danger {
            self.refuse(FIND_DELETE);
        }
        if (delete || exec_rm) && roots.iter().any(|a| credential_path(&a.value)) {
            self.refuse(CREDENTIAL_DELETE);
        }
    }
}
