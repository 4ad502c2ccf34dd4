//! Secrets in shell commands: secret-named variable assignments (`export DB_PASSWORD=...`),
//! `--password=...` style options, and the password arguments of common clients (`mysql -p...`,
//! `curl -u user:pass`, `sshpass -p ...`). Values of any length count: short passwords are the
//! ones people type.

use super::{NameKind, is_secret_name, literal_at};

/// `NAME=value` at the start of a word, where the name says secret: the value.
pub(super) fn scan_secret_variables(b: &[u8], out: &mut Vec<(usize, usize)>) {
    let is_name_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    for p in 0..b.len() {
        if b[p] != b'=' || matches!(b.get(p + 1), None | Some(b'=' | b' ' | b'\t' | b'\n')) {
            continue;
        }
        let mut k = p;
        while k > 0 && is_name_char(b[k - 1]) {
            k -= 1;
        }
        // A word start: not the tail of `--flag=`, `a.b=`, `?q=` or `&q=` (other scanners own
        // those, and a query value ends at `#` where a shell value does not).
        let at_word_start = k == 0
            || b[k - 1].is_ascii_whitespace()
            || matches!(b[k - 1], b';' | b'|' | b'(' | b'{' | b'`' | b'"' | b'\'');
        if k == p || b[k].is_ascii_digit() || !at_word_start {
            continue;
        }
        if is_secret_name(&b[k..p], NameKind::Variable)
            && let Some(range) = literal_at(b, p + 1, 1)
        {
            out.push(range);
        }
    }
}

/// `--password=value`, `--db-token=value`, `--auth=value` (any length; the spaced form
/// `--password value` is the 8-byte rule in the parent module, since `mysql --password db`
/// prompts and `db` is no secret).
pub(super) fn scan_password_flags(b: &[u8], out: &mut Vec<(usize, usize)>) {
    for (s, e) in command_words(b).into_iter().flatten() {
        let word = &b[s..e];
        let Some(flag) = word.strip_prefix(b"--") else {
            continue;
        };
        if let Some(eq) = flag.iter().position(|&c| c == b'=')
            && eq + 1 < flag.len()
            && is_secret_name(&flag[..eq], NameKind::Flag)
            && let Some(range) = literal_at(b, s + 2 + eq + 1, 1)
        {
            out.push((range.0, range.1.min(e)));
        }
    }
}

/// How a client's password option carries its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Carries {
    /// Only glued to the option (`mysql -pSECRET`; a bare `-p` prompts).
    Attached,
    /// Glued or as the next word (`sshpass -p SECRET`).
    Password,
    /// `user:password`, glued or as the next word; only the part after the first `:` is secret.
    UserPass,
}

const MYSQL: &[&str] = &[
    "mysql",
    "mysqldump",
    "mysqladmin",
    "mysqlimport",
    "mysqlshow",
    "mysqlcheck",
    "mysqlpump",
    "mysqlsh",
    "mariadb",
    "mariadb-dump",
    "mariadb-admin",
];
const CURL: &[&str] = &["curl", "curlie"];
const HTTPIE: &[&str] = &["http", "https", "xh", "xhs"];
const MONGO: &[&str] = &[
    "mongo",
    "mongosh",
    "mongodump",
    "mongorestore",
    "mongoexport",
    "mongoimport",
];

/// Clients, the option that carries a password, and how.
const CLIENT_OPTIONS: &[(&[&str], &str, Carries)] = &[
    (MYSQL, "-p", Carries::Attached),
    (&["sshpass"], "-p", Carries::Password),
    (CURL, "-u", Carries::UserPass),
    (CURL, "-U", Carries::UserPass),
    (CURL, "--user", Carries::UserPass),
    (CURL, "--proxy-user", Carries::UserPass),
    (HTTPIE, "-a", Carries::UserPass),
    (HTTPIE, "--auth", Carries::UserPass),
    (&["redis-cli", "valkey-cli"], "-a", Carries::Password),
    (MONGO, "-p", Carries::Password),
    (&["sqlcmd", "bcp"], "-P", Carries::Password),
];

/// Password arguments of clients named earlier in the same simple command.
pub(super) fn scan_client_passwords(b: &[u8], out: &mut Vec<(usize, usize)>) {
    for words in command_words(b) {
        let mut seen: Vec<&str> = Vec::new();
        for (idx, &(s, e)) in words.iter().enumerate() {
            let word = unquoted(b, s, e);
            let base = word.rsplit(|&c| c == b'/').next().unwrap_or(word);
            for &(clients, option, carries) in CLIENT_OPTIONS {
                if clients.iter().any(|c| c.as_bytes() == base) {
                    seen.extend_from_slice(clients);
                }
                if !clients.iter().any(|c| seen.contains(c)) {
                    continue;
                }
                let value = option_value(b, &words, idx, option, carries);
                if let Some((vs, ve)) = value.and_then(|(vs, ve)| strip_quotes(b, vs, ve)) {
                    let secret = match carries {
                        Carries::UserPass => b[vs..ve]
                            .iter()
                            .position(|&c| c == b':')
                            .map(|colon| (vs + colon + 1, ve)),
                        Carries::Attached | Carries::Password => Some((vs, ve)),
                    };
                    if let Some((ss, se)) = secret
                        && se > ss
                        && b[ss] != b'$'
                    {
                        out.push((ss, se));
                    }
                }
            }
        }
    }
}

/// The value `option` carries at word `idx`: glued (`-pX`, `--user=X`) or the next word.
fn option_value(
    b: &[u8],
    words: &[(usize, usize)],
    idx: usize,
    option: &str,
    carries: Carries,
) -> Option<(usize, usize)> {
    let (s, e) = *words.get(idx)?;
    let word = &b[s..e];
    let opt = option.as_bytes();
    if word == opt {
        if carries == Carries::Attached {
            return None;
        }
        let &(ns, ne) = words.get(idx + 1)?;
        return (b[ns] != b'-').then_some((ns, ne));
    }
    let rest = word.strip_prefix(opt)?;
    let glued = if option.starts_with("--") {
        rest.strip_prefix(b"=")?
    } else {
        rest
    };
    (!glued.is_empty()).then_some((e - glued.len(), e))
}

fn unquoted(b: &[u8], s: usize, e: usize) -> &[u8] {
    strip_quotes(b, s, e).map_or(&b[s..e], |(s, e)| &b[s..e])
}

/// The inside of a word wrapped in one pair of matching quotes, or the word itself.
fn strip_quotes(b: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if e <= s {
        return None;
    }
    match b[s] {
        q @ (b'\'' | b'"') if e - s >= 2 && b[e - 1] == q => Some((s + 1, e - 1)),
        q @ (b'\'' | b'"') if b[s + 1..e].contains(&q) => None,
        b'\'' | b'"' => Some((s + 1, e)),
        _ => Some((s, e)),
    }
}

/// Words of `b` as byte ranges, grouped by simple command (split at `;`, `|`, `&`, `(`, `)`,
/// backticks and newlines outside quotes). Rough on purpose: it only has to find options and
/// their values, and it never fails.
fn command_words(b: &[u8]) -> Vec<Vec<(usize, usize)>> {
    let mut commands = vec![Vec::new()];
    let mut start: Option<usize> = None;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' && q == b'"' {
                i += 1;
            } else if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        let separator = matches!(c, b';' | b'|' | b'&' | b'(' | b')' | b'`' | b'\n');
        if c.is_ascii_whitespace() || separator {
            if let (Some(s), Some(words)) = (start.take(), commands.last_mut()) {
                words.push((s, i));
            }
            if separator {
                commands.push(Vec::new());
            }
        } else {
            start.get_or_insert(i);
            match c {
                b'\'' | b'"' => quote = Some(c),
                b'\\' => i += 1,
                _ => {}
            }
        }
        i += 1;
    }
    if let (Some(s), Some(words)) = (start, commands.last_mut()) {
        words.push((s, b.len()));
    }
    commands
}
