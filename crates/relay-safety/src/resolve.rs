//! Wrapper resolution: sees through `sudo`, `env`, `xargs`, `sh -c`, ... to what really runs.

use std::slice;

use super::args::Arg;

/// The command a simple command really runs, after looking through wrappers.
#[derive(Default)]
pub(super) struct Resolved {
    /// Every command word met (wrappers and the final program): lowercase basename, arg index.
    pub(super) chain: Vec<(String, usize)>,
    /// The final program and its arg index; its arguments follow it.
    pub(super) prog: Option<(String, usize)>,
    /// Command lines run by the command (`sh -c`, `eval`, `watch`, `ssh host CMD`, ...).
    pub(super) scripts: Vec<(String, (usize, usize))>,
    /// Word indices consumed as such scripts.
    pub(super) script_words: Vec<usize>,
    pub(super) interp_seen: bool,
    pub(super) shell_c: bool,
    pub(super) shell_stdin: bool,
}

impl Resolved {
    fn add_script(&mut self, text: String, args: &[Arg<'_>]) {
        let (Some(first), Some(last)) = (args.first(), args.last()) else {
            return;
        };
        let start = args.iter().map(|a| a.span.0).min().unwrap_or(first.span.0);
        let end = args.iter().map(|a| a.span.1).max().unwrap_or(last.span.1);
        self.script_words.extend(args.iter().map(|a| a.word));
        self.scripts.push((text, (start, end)));
    }
}

#[derive(Default)]
struct Opts {
    n: usize,
    short: Vec<u8>,
    long: Vec<String>,
}

impl Opts {
    fn has_short(&self, c: u8) -> bool {
        self.short.contains(&c)
    }

    fn has_long(&self, name: &str) -> bool {
        self.long.iter().any(|l| l == name)
    }
}

/// Skips leading options (stopping after `--` or at the first non-option).
fn opts(args: &[Arg<'_>], short_valued: &[u8], long_valued: &[&str]) -> Opts {
    let mut o = Opts::default();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let v = a.value.as_bytes();
        if v == b"--" {
            i += 1;
            break;
        }
        if v.len() < 2 || v[0] != b'-' {
            break;
        }
        if v[1] == b'-' {
            let (name, has_value) = match a.value.find('=') {
                Some(p) => (&a.value[..p], true),
                None => (a.value.as_str(), false),
            };
            o.long.push(name.to_string());
            i += if !has_value && long_valued.contains(&name) {
                2
            } else {
                1
            };
            continue;
        }
        let mut consumed = 1;
        for (j, &c) in v.iter().enumerate().skip(1) {
            o.short.push(c);
            if short_valued.contains(&c) {
                if j + 1 == v.len() {
                    consumed = 2;
                }
                break;
            }
        }
        i += consumed;
    }
    o.n = i.min(args.len());
    o
}

fn joined(args: &[Arg<'_>]) -> String {
    args.iter()
        .map(|a| a.value.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Lowercase basename of a command word (`/usr/bin/Sudo` -> `sudo`).
pub(super) fn prog_name(v: &str) -> String {
    v.rsplit('/').next().unwrap_or(v).to_ascii_lowercase()
}

fn is_assignment(v: &str) -> bool {
    let Some(eq) = v.find('=') else {
        return false;
    };
    let name = &v[..eq];
    let name = name.strip_suffix('+').unwrap_or(name);
    !name.is_empty()
        && name
            .bytes()
            .enumerate()
            .all(|(i, c)| c == b'_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()))
}

pub(super) fn is_shell(n: &str) -> bool {
    matches!(
        n,
        "sh" | "bash"
            | "zsh"
            | "dash"
            | "ksh"
            | "mksh"
            | "ash"
            | "fish"
            | "csh"
            | "tcsh"
            | "yash"
            | "posh"
            | "rbash"
    )
}

pub(super) fn is_interpreter(n: &str) -> bool {
    let versioned = |base: &str| {
        n.strip_prefix(base)
            .is_some_and(|rest| rest.bytes().all(|c| c.is_ascii_digit() || c == b'.'))
    };
    is_shell(n)
        || versioned("python")
        || versioned("pypy")
        || versioned("perl")
        || versioned("ruby")
        || versioned("php")
        || versioned("lua")
        || matches!(
            n,
            "node"
                | "nodejs"
                | "deno"
                | "bun"
                | "luajit"
                | "tclsh"
                | "pwsh"
                | "powershell"
                | "osascript"
                | "eval"
                | "source"
                | "."
        )
}

pub(super) fn is_downloader(n: &str) -> bool {
    matches!(n, "curl" | "wget" | "wget2" | "fetch" | "aria2c")
}

pub(super) fn is_elevation(n: &str) -> bool {
    matches!(n, "sudo" | "doas" | "su" | "pkexec" | "sudoedit" | "run0")
}

pub(super) fn resolve(args: &[Arg<'_>]) -> Resolved {
    let mut r = Resolved::default();
    let mut k = 0;
    while k < args.len() {
        while args.get(k).is_some_and(|a| is_assignment(&a.value)) {
            k += 1;
        }
        let Some(a) = args.get(k) else {
            break;
        };
        let name = prog_name(&a.value);
        r.chain.push((name.clone(), k));
        if is_interpreter(&name) {
            r.interp_seen = true;
        }
        let rest = &args[k + 1..];
        match wrapper_step(&name, a, rest, &mut r) {
            Some(n) => k += 1 + n,
            None => {
                r.prog = Some((name, k));
                break;
            }
        }
    }
    r
}

/// For a wrapper, how many of `rest` to skip to reach the wrapped command; `None` when `name` is
/// the program itself (scripts it runs are recorded in `r`).
fn wrapper_step(name: &str, a: &Arg<'_>, rest: &[Arg<'_>], r: &mut Resolved) -> Option<usize> {
    match name {
        "sudo" | "run0" => {
            let o = opts(
                rest,
                b"ugpCDrtTUh",
                &[
                    "--user",
                    "--group",
                    "--prompt",
                    "--close-from",
                    "--chdir",
                    "--role",
                    "--type",
                    "--command-timeout",
                    "--other-user",
                    "--host",
                ],
            );
            (!(o.has_short(b'e') || o.has_long("--edit"))).then_some(o.n)
        }
        "doas" => {
            let o = opts(rest, b"uC", &[]);
            (!o.has_short(b'C')).then_some(o.n)
        }
        "pkexec" => Some(opts(rest, b"", &["--user"]).n),
        "{" | "!" => Some(0),
        "nohup" | "builtin" | "busybox" | "setsid" | "nocorrect" | "noglob" | "unbuffer" => {
            Some(opts(rest, b"", &[]).n)
        }
        "time" => Some(opts(rest, b"fo", &["--format", "--output"]).n),
        "nice" => Some(opts(rest, b"n", &["--adjustment"]).n),
        "ionice" => {
            let o = opts(
                rest,
                b"cnpPu",
                &["--class", "--classdata", "--pid", "--pgid", "--uid"],
            );
            let targets_pid = o.short.iter().any(|c| b"pPu".contains(c))
                || o.has_long("--pid")
                || o.has_long("--pgid")
                || o.has_long("--uid");
            (!targets_pid).then_some(o.n)
        }
        "stdbuf" => Some(opts(rest, b"ioe", &["--input", "--output", "--error"]).n),
        "timeout" => Some(opts(rest, b"sk", &["--signal", "--kill-after"]).n + 1),
        "command" => {
            let o = opts(rest, b"", &[]);
            (!(o.has_short(b'v') || o.has_short(b'V'))).then_some(o.n)
        }
        "exec" => Some(opts(rest, b"a", &[]).n),
        "chroot" => Some(opts(rest, b"", &["--userspec", "--groups"]).n + 1),
        "xargs" => Some(
            opts(
                rest,
                b"aEILnPsd",
                &[
                    "--arg-file",
                    "--delimiter",
                    "--eof",
                    "--max-lines",
                    "--max-args",
                    "--max-procs",
                    "--max-chars",
                    "--process-slot-var",
                ],
            )
            .n,
        ),
        "env" => env_step(rest, r),
        "watch" => {
            let o = opts(rest, b"nq", &["--interval", "--equexit"]);
            if o.has_short(b'x') || o.has_long("--exec") {
                return Some(o.n);
            }
            let cmd = rest.get(o.n..).unwrap_or_default();
            r.add_script(joined(cmd), cmd);
            None
        }
        "eval" => {
            r.add_script(joined(rest), rest);
            None
        }
        "alias" => {
            for arg in rest {
                if let Some(p) = arg.value.find('=') {
                    r.add_script(arg.value[p + 1..].to_string(), slice::from_ref(arg));
                }
            }
            None
        }
        "su" => {
            su_step(rest, r);
            None
        }
        "ssh" => {
            let o = opts(rest, b"BbcDEeFIiJLlmOoPpQRSWw", &[]);
            let remote = rest.get(o.n + 1..).unwrap_or_default();
            r.add_script(joined(remote), remote);
            None
        }
        "source" | "." => {
            if rest
                .first()
                .is_some_and(|x| matches!(x.value.as_str(), "/dev/stdin" | "/proc/self/fd/0" | "-"))
            {
                r.shell_stdin = true;
            }
            None
        }
        n if is_shell(n) => {
            shell_step(rest, r);
            None
        }
        _ => {
            // `$SHELL -c '...'`: an unknown program from a variable may well be a shell.
            if a.lead
                && let Some(p) = rest.iter().position(|x| x.value == "-c")
                && let Some(script) = rest.get(p + 1)
            {
                r.add_script(script.value.clone(), slice::from_ref(script));
            }
            None
        }
    }
}

fn env_step(rest: &[Arg<'_>], r: &mut Resolved) -> Option<usize> {
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        let v = a.value.as_str();
        if v == "-" {
            i += 1;
            continue;
        }
        if !v.starts_with('-') || v.len() < 2 {
            break;
        }
        // -S / --split-string: the string is split into a command line.
        let mut split: Option<(String, usize)> = None;
        if v == "--split-string" {
            split = rest.get(i + 1).map(|s| (s.value.clone(), i + 2));
        } else if let Some(s) = v.strip_prefix("--split-string=") {
            split = Some((s.to_string(), i + 1));
        } else if !v.starts_with("--") {
            for (j, c) in v.bytes().enumerate().skip(1) {
                if c == b'u' || c == b'C' {
                    break;
                }
                if c == b'S' {
                    let tail = &v[j + 1..];
                    split = if tail.is_empty() {
                        rest.get(i + 1).map(|s| (s.value.clone(), i + 2))
                    } else {
                        Some((tail.to_string(), i + 1))
                    };
                    break;
                }
            }
        }
        if let Some((text, after)) = split {
            let tail = rest.get(after..).unwrap_or_default();
            let full = if tail.is_empty() {
                text
            } else {
                format!("{text} {}", joined(tail))
            };
            r.add_script(full, rest.get(i..).unwrap_or_default());
            return None;
        }
        let o = opts(&rest[i..], b"uC", &["--unset", "--chdir"]);
        i += o.n.max(1);
        if o.long.is_empty() && o.short.is_empty() {
            break;
        }
    }
    Some(i)
}

fn su_step(rest: &[Arg<'_>], r: &mut Resolved) {
    for (i, a) in rest.iter().enumerate() {
        let v = a.value.as_str();
        if matches!(v, "-c" | "--command" | "--session-command") {
            if let Some(s) = rest.get(i + 1) {
                r.add_script(s.value.clone(), slice::from_ref(s));
            }
            return;
        }
        if let Some(s) = v
            .strip_prefix("--command=")
            .or_else(|| v.strip_prefix("--session-command="))
        {
            r.add_script(s.to_string(), slice::from_ref(a));
            return;
        }
        if v.starts_with('-')
            && !v.starts_with("--")
            && let Some(p) = v.find('c')
        {
            let tail = &v[p + 1..];
            if tail.is_empty() {
                if let Some(s) = rest.get(i + 1) {
                    r.add_script(s.value.clone(), slice::from_ref(s));
                }
            } else {
                r.add_script(tail.to_string(), slice::from_ref(a));
            }
            return;
        }
    }
}

fn shell_step(rest: &[Arg<'_>], r: &mut Resolved) {
    let mut i = 0;
    let mut has_c = false;
    let mut stdin_flag = false;
    while let Some(a) = rest.get(i) {
        let v = a.value.as_str();
        if v == "--" || v == "-" {
            stdin_flag |= v == "-";
            i += 1;
            break;
        }
        if let Some(long) = v.strip_prefix("--") {
            if long == "command" {
                has_c = true;
                i += 1;
                break;
            }
            if let Some(s) = long.strip_prefix("command=") {
                r.shell_c = true;
                r.add_script(s.to_string(), slice::from_ref(a));
                return;
            }
            i += if matches!(long, "rcfile" | "init-file" | "init-command") {
                2
            } else {
                1
            };
            continue;
        }
        if (v.starts_with('-') || v.starts_with('+')) && v.len() > 1 {
            let cluster = &v[1..];
            if v.starts_with('-') {
                has_c |= cluster.contains('c');
                stdin_flag |= cluster.contains('s');
            }
            i += 1;
            if cluster.contains('o') || cluster.contains('O') {
                i += 1;
            }
            continue;
        }
        break;
    }
    if has_c {
        r.shell_c = true;
        if let Some(s) = rest.get(i) {
            r.add_script(s.value.clone(), slice::from_ref(s));
        }
    } else {
        let first = rest.get(i).map(|a| a.value.as_str());
        r.shell_stdin =
            stdin_flag || matches!(first, None | Some("/dev/stdin" | "/proc/self/fd/0"));
    }
}
