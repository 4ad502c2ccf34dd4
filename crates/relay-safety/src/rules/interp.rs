//! Interpreter one-liners (`python -c`, `perl -e`, `ruby -e`, `node -e`, `php -r`): the code is
//! read as tokens, and refused when it deletes or overwrites files, builds code at run time, or
//! runs a shell command that this checker refuses (the command's literal text is checked like a
//! typed line; a command built from variables cannot be seen, so it is refused).

use super::super::args::Arg;
use super::super::parser::SpanMap;
use super::super::reason::{INTERPRETER, UNPARSEABLE};
use super::super::walk::Walker;
use super::short_cluster;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Lang {
    Python,
    Perl,
    Ruby,
    Node,
    Php,
}

pub(super) fn language(name: &str) -> Option<Lang> {
    let versioned = |base: &str| {
        name.strip_prefix(base)
            .is_some_and(|rest| rest.bytes().all(|c| c.is_ascii_digit() || c == b'.'))
    };
    if versioned("python") || versioned("pypy") {
        Some(Lang::Python)
    } else if versioned("perl") {
        Some(Lang::Perl)
    } else if versioned("ruby") {
        Some(Lang::Ruby)
    } else if versioned("php") {
        Some(Lang::Php)
    } else if matches!(name, "node" | "nodejs" | "bun" | "deno") {
        Some(Lang::Node)
    } else {
        None
    }
}

/// Calls that delete, truncate, move over or write files, whatever object they are called on.
const WRITES: &[&str] = &[
    "rmtree",
    "unlink",
    "unlinkSync",
    "rmSync",
    "rmdir",
    "rmdirSync",
    "removedirs",
    "remove_tree",
    "rm_rf",
    "rm_r",
    "rm_f",
    "removeSync",
    "emptyDirSync",
    "truncate",
    "truncateSync",
    "writeFile",
    "writeFileSync",
    "appendFileSync",
    "createWriteStream",
    "copyFileSync",
    "renameSync",
    "cpSync",
    "write_text",
    "write_bytes",
    "file_put_contents",
    "copyfile",
    "copytree",
];

/// Calls that delete or move files when called on a file-system module (`os.remove`,
/// `File.delete`, `fs.rm`, `shutil.move`), and are ordinary methods elsewhere (`list.remove`).
const MODULE_WRITES: &[&str] = &[
    "remove", "delete", "rm", "rename", "replace", "move", "mv", "write", "copy", "cp",
];
const FS_MODULES: &[&str] = &[
    "os",
    "shutil",
    "fs",
    "fsp",
    "promises",
    "File",
    "FileUtils",
    "Dir",
    "Files",
    "IO",
    "Path",
];

/// Calls that run a program or a shell command.
const RUNS: &[&str] = &[
    "system",
    "exec",
    "execSync",
    "execFile",
    "execFileSync",
    "spawn",
    "spawnSync",
    "popen",
    "Popen",
    "check_output",
    "check_call",
    "getoutput",
    "getstatusoutput",
    "shell_exec",
    "passthru",
    "proc_open",
    "execv",
    "execve",
    "execvp",
    "execvpe",
    "execl",
    "execlp",
    "execle",
    "spawnv",
    "spawnvp",
    "spawnl",
    "spawnlp",
    "capture2",
    "capture2e",
    "capture3",
];

/// Calls that make or reach code at run time, which no reading of the line can follow.
const DYNAMIC: &[&str] = &[
    "eval",
    "compile",
    "getattr",
    "globals",
    "vars",
    "__builtins__",
    "__dict__",
    "Function",
    "send",
    "public_send",
    "__send__",
    "instance_eval",
    "class_eval",
    "instance_exec",
    "const_get",
    "constantize",
];

#[derive(Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// A string literal's contents; `shell` for backticks, `qx{}` and `%x{}` in Perl, Ruby and
    /// PHP; `interpolated` for Python f-strings.
    Str {
        text: String,
        shell: bool,
        interpolated: bool,
    },
    Punct(u8),
}

/// The code arguments of a one-liner, or `None` when it runs none.
fn code_args<'x, 'a>(lang: Lang, name: &str, args: &'x [Arg<'a>]) -> Vec<&'x Arg<'a>> {
    let mut out = Vec::new();
    let mut i = 0;
    if name == "deno" {
        return match args.first() {
            Some(a) if a.value == "eval" => args.iter().skip(1).take(1).collect(),
            _ => out,
        };
    }
    while let Some(a) = args.get(i) {
        let v = a.value.as_str();
        let takes_code = match lang {
            Lang::Node => matches!(v, "-e" | "--eval" | "-p" | "--print"),
            Lang::Php => v == "-r",
            Lang::Python => short_cluster(v).is_some_and(|c| c.ends_with(b"c")),
            // `-pi -e`, `-lne`, `-E`; a `-M` module list is read as code too.
            Lang::Perl | Lang::Ruby => {
                if v.starts_with("-M") || v.starts_with("-r") {
                    out.push(a);
                }
                short_cluster(v).is_some_and(|c| c.ends_with(b"e") || c.ends_with(b"E"))
            }
        };
        if takes_code {
            if let Some(code) = args.get(i + 1) {
                out.push(code);
            }
            i += 2;
            continue;
        }
        if !v.starts_with('-') && lang != Lang::Perl && lang != Lang::Ruby {
            break;
        }
        i += 1;
    }
    out
}

fn tokens(code: &[u8], lang: Lang) -> Option<Vec<Tok>> {
    let shell_backticks = matches!(lang, Lang::Perl | Lang::Ruby | Lang::Php);
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = code.get(i) {
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while code
                .get(i)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
            {
                i += 1;
            }
            let ident = String::from_utf8_lossy(&code[start..i]).into_owned();
            let next = code.get(i).copied();
            let prefix_f = lang == Lang::Python
                && ident.len() <= 2
                && ident.to_ascii_lowercase().contains('f')
                && matches!(next, Some(b'"' | b'\''));
            // `qx{...}` (Perl) runs a shell command; `q{}`/`qq{}` are strings.
            if lang == Lang::Perl
                && matches!(ident.as_str(), "qx" | "q" | "qq")
                && let Some(open @ (b'{' | b'(' | b'[' | b'/' | b'|' | b'!')) = next
            {
                let (text, end) = delimited(code, i, open)?;
                out.push(Tok::Str {
                    text,
                    shell: ident == "qx",
                    interpolated: false,
                });
                i = end;
                continue;
            }
            if prefix_f {
                let (text, end) = quoted(code, i)?;
                out.push(Tok::Str {
                    interpolated: text.contains('{'),
                    text,
                    shell: false,
                });
                i = end;
                continue;
            }
            out.push(Tok::Ident(ident));
            continue;
        }
        match c {
            b'"' | b'\'' | b'`' => {
                let (text, end) = quoted(code, i)?;
                out.push(Tok::Str {
                    text,
                    shell: c == b'`' && shell_backticks,
                    interpolated: false,
                });
                i = end;
            }
            b'%' if lang == Lang::Ruby && code.get(i + 1) == Some(&b'x') => {
                let open = *code.get(i + 2)?;
                let (text, end) = delimited(code, i + 2, open)?;
                out.push(Tok::Str {
                    text,
                    shell: true,
                    interpolated: false,
                });
                i = end;
            }
            c if c.is_ascii_whitespace() => i += 1,
            _ => {
                out.push(Tok::Punct(c));
                i += 1;
            }
        }
    }
    Some(out)
}

/// A quoted literal starting at `i` (Python's triple quotes included): its text and the index
/// after it; `None` when it never closes.
fn quoted(code: &[u8], i: usize) -> Option<(String, usize)> {
    let q = *code.get(i)?;
    let triple = [q, q, q];
    if code.get(i..i + 3) == Some(&triple[..]) {
        let body = i + 3;
        let len = code.get(body..)?.windows(3).position(|w| w == triple)?;
        let text = String::from_utf8_lossy(&code[body..body + len]).into_owned();
        return Some((text, body + len + 3));
    }
    let mut j = i + 1;
    let mut text = Vec::new();
    while let Some(&c) = code.get(j) {
        if c == b'\\' {
            text.extend(code.get(j + 1));
            j += 2;
        } else if c == q {
            return Some((String::from_utf8_lossy(&text).into_owned(), j + 1));
        } else {
            text.push(c);
            j += 1;
        }
    }
    None
}

/// `{...}`, `(...)`, `[...]` or `/.../`-style quoting that starts at `i`.
fn delimited(code: &[u8], i: usize, open: u8) -> Option<(String, usize)> {
    let close = match open {
        b'{' => b'}',
        b'(' => b')',
        b'[' => b']',
        b'<' => b'>',
        other => other,
    };
    let mut level = 0usize;
    for (j, &c) in code.iter().enumerate().skip(i + 1) {
        if c == close && level == 0 {
            let text = String::from_utf8_lossy(&code[i + 1..j]).into_owned();
            return Some((text, j + 1));
        }
        if open != close && c == open {
            level += 1;
        } else if open != close && c == close {
            level -= 1;
        }
    }
    None
}

/// The tokens of a call's arguments: inside the parentheses after `i`, or up to `;` without.
fn call_args(toks: &[Tok], i: usize) -> &[Tok] {
    let start = i + 1;
    if toks.get(start) == Some(&Tok::Punct(b'(')) {
        let mut level = 0usize;
        for (j, t) in toks.iter().enumerate().skip(start) {
            match t {
                Tok::Punct(b'(' | b'[' | b'{') => level += 1,
                Tok::Punct(b')' | b']' | b'}') => {
                    level = level.saturating_sub(1);
                    if level == 0 {
                        return &toks[start + 1..j];
                    }
                }
                _ => {}
            }
        }
        return &toks[start + 1..];
    }
    let end = toks[start.min(toks.len())..]
        .iter()
        .position(|t| matches!(t, Tok::Punct(b';' | b')' | b'}')))
        .map_or(toks.len(), |p| start + p);
    &toks[start.min(end)..end]
}

/// The shell text a run call's arguments spell, if they are literals only (`name=value` keyword
/// arguments and `key: value` options aside); `None` for anything built at run time.
fn literal_command(args: &[Tok]) -> Option<String> {
    let mut parts = Vec::new();
    let mut k = 0;
    while let Some(t) = args.get(k) {
        match t {
            Tok::Str {
                interpolated: true, ..
            } => return None,
            Tok::Str { text, .. } => parts.push(text.replace("#{", "${")),
            Tok::Ident(_) if matches!(args.get(k + 1), Some(Tok::Punct(b'=' | b':'))) => {
                k += 2;
                if matches!(args.get(k), Some(Tok::Ident(_))) {
                    k += 1;
                }
                continue;
            }
            Tok::Ident(_) => return None,
            Tok::Punct(b'$' | b'@' | b'+' | b'.') => return None,
            Tok::Punct(_) => {}
        }
        k += 1;
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// Whether a command run from a one-liner names a program that deletes or overwrites files
/// (`system("rm x")` is the same deletion as `unlink "x"`).
fn runs_deleter(cmd: &str) -> bool {
    cmd.split(|c: char| c.is_whitespace() || ";|&()'\"".contains(c))
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .any(|w| {
            matches!(
                w,
                "rm" | "shred" | "unlink" | "rmdir" | "srm" | "wipe" | "truncate" | "dd" | "mv"
            )
        })
}

impl Walker {
    pub(super) fn one_liner(&mut self, name: &str, args: &[Arg<'_>], depth: usize) {
        let Some(lang) = language(name) else {
            return;
        };
        for code in code_args(lang, name, args) {
            if code.lead || !code.subs.is_empty() {
                self.refuse(INTERPRETER);
                return;
            }
            let Some(toks) = tokens(code.value.as_bytes(), lang) else {
                self.refuse(UNPARSEABLE);
                return;
            };
            let span = code.span;
            for (i, t) in toks.iter().enumerate() {
                match t {
                    Tok::Str {
                        text, shell: true, ..
                    } => self.check_text(text, SpanMap::Fixed(span.0, span.1), depth + 1),
                    Tok::Ident(id) => {
                        let before = |n: usize| i.checked_sub(n).and_then(|p| toks.get(p));
                        let qualifier = match (before(2), before(1)) {
                            (Some(Tok::Ident(q)), Some(Tok::Punct(b'.' | b':' | b'>'))) => {
                                Some(q.as_str())
                            }
                            _ => None,
                        };
                        self.one_liner_call(&toks, i, id, qualifier, span, depth);
                    }
                    _ => {}
                }
            }
        }
    }

    fn one_liner_call(
        &mut self,
        toks: &[Tok],
        i: usize,
        id: &str,
        qualifier: Option<&str>,
        span: (usize, usize),
        depth: usize,
    ) {
        let module_write =
            MODULE_WRITES.contains(&id) && qualifier.is_some_and(|q| FS_MODULES.contains(&q));
        if WRITES.contains(&id) || module_write || DYNAMIC.contains(&id) {
            self.refuse(INTERPRETER);
            return;
        }
        let runs =
            RUNS.contains(&id) || (matches!(id, "run" | "call") && qualifier == Some("subprocess"));
        if runs {
            match literal_command(call_args(toks, i)) {
                Some(cmd) if runs_deleter(&cmd) => self.refuse(INTERPRETER),
                Some(cmd) => self.check_text(&cmd, SpanMap::Fixed(span.0, span.1), depth + 1),
                None => self.refuse(INTERPRETER),
            }
            return;
        }
        if matches!(id, "open" | "fopen" | "sysopen") {
            let writes = call_args(toks, i).iter().any(|t| match t {
                Tok::Str { text, .. } => {
                    let t = text.trim();
                    let mode = !t.is_empty()
                        && t.len() <= 4
                        && t.bytes().all(|c| b"rwaxbt+U".contains(&c))
                        && t.contains(['w', 'a', 'x', '+']);
                    mode || t.starts_with(['>', '|', '+']) || t.ends_with('|')
                }
                _ => false,
            });
            self.refuse_if(writes, INTERPRETER);
        }
    }
}
