//! read_file, list_dir, write_file, edit_file and write_plan: plain file work inside the project
//! root (every path goes through `Project::resolve`; writes then go through `safe_fs`, which never
//! follows a symlink, and write_plan, which needs no approval, refuses any). A read that stops before the end says where
//! to resume (rule 1); an edit needs one exact match, or `replace_all` (rule 3), and changes nothing
//! otherwise.

use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use super::{opt_bool, opt_int, opt_str, safe_fs, str_arg};
use crate::client::project::Project;

/// Bytes looked at for a NUL, the sign of a binary file.
const BINARY_PROBE: u64 = 8192;
/// Up to this size the truncation note counts the file's lines; past it, it gives the size.
const COUNT_LINES_UP_TO: u64 = 8 * 1024 * 1024;
/// Files edit_file loads whole; a larger one is refused rather than read into memory.
const EDIT_BYTES: u64 = 16 * 1024 * 1024;
/// Lines a read returns when the model names no limit.
const DEFAULT_LINES: usize = 2000;
/// Bytes a read returns at most, whatever the limit.
const READ_BYTES: usize = 64 * 1024;
const LIST_ENTRIES: usize = 1000;

pub fn read_file(project: &Project, args: &Value) -> anyhow::Result<String> {
    let path = str_arg(args, "path")?;
    let full = project.resolve(path)?;
    let offset = usize::try_from(opt_int(args, "offset")?.unwrap_or(0).max(0))?;
    let limit = match opt_int(args, "limit")? {
        Some(l) if l > 0 => usize::try_from(l)?,
        _ => DEFAULT_LINES,
    };
    // Bounded throughout: the first bytes for the binary check, then a window of at most the cap
    // after the skipped lines; memory stays near READ_BYTES whatever the file's size.
    let (mut file, size) = safe_fs::open_regular(&full, path)?;
    let head = safe_fs::read_up_to(&mut file, BINARY_PROBE)
        .with_context(|| format!("cannot read {path}"))?;
    if head.contains(&0) {
        anyhow::bail!("{path} is a binary file ({size} bytes); read_file shows text only");
    }
    file.rewind()
        .with_context(|| format!("cannot read {path}"))?;
    let mut reader = BufReader::with_capacity(READ_BYTES, file);
    let skipped = skip_lines(&mut reader, offset).with_context(|| format!("cannot read {path}"))?;
    let mut window = Vec::new();
    (&mut reader)
        .take(READ_BYTES as u64 + 1)
        .read_to_end(&mut window)
        .with_context(|| format!("cannot read {path}"))?;
    if window.is_empty() && offset > 0 {
        return Ok(format!(
            "[offset {offset} is past the end: {path} has {skipped} lines]"
        ));
    }
    let eof = window.len() <= READ_BYTES;
    let mut out = String::new();
    let mut next = offset;
    let mut used = 0;
    for piece in window.split_inclusive(|b| *b == b'\n') {
        let complete = piece.ends_with(b"\n") || eof;
        if next - offset >= limit || !complete {
            break;
        }
        let line = piece.strip_suffix(b"\n").unwrap_or(piece);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !out.is_empty() && out.len() + line.len() + 1 > READ_BYTES {
            break;
        }
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
        used += piece.len();
        next += 1;
    }
    if next == offset && !window.is_empty() {
        // One line longer than the whole cap: its start, said so, rather than nothing.
        let shown = String::from_utf8_lossy(&window[..window.len().min(READ_BYTES)]);
        return Ok(format!(
            "{shown}\n[line {offset} is longer than {READ_BYTES} bytes; only its start is shown]"
        ));
    }
    if used < window.len() || !eof {
        // The number of lines is told when counting them costs little.
        let total = if size <= COUNT_LINES_UP_TO {
            let rest = (&window[used..]).chain(&mut reader);
            let after = count_lines(&mut BufReader::new(rest))
                .with_context(|| format!("cannot read {path}"))?;
            format!(" of {}", next + after)
        } else {
            format!(" (of a {size}-byte file)")
        };
        out.push_str(&format!(
            "[truncated: lines {offset}-{}{total} shown; call read_file with offset={next} to continue]",
            next - 1,
        ));
    }
    Ok(out)
}

/// Skips `n` lines without keeping them (a line may be gigabytes long); returns how many there were.
fn skip_lines(reader: &mut impl BufRead, n: usize) -> std::io::Result<usize> {
    let mut done = 0;
    let mut partial = false;
    while done < n {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(done + usize::from(partial));
        }
        let (used, ended) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        reader.consume(used);
        if ended {
            done += 1;
            partial = false;
        } else {
            partial = true;
        }
    }
    Ok(done)
}

/// The lines left in `reader`, counted as `str::lines` would (a last line needs no line end).
fn count_lines(reader: &mut impl BufRead) -> std::io::Result<usize> {
    let mut lines = 0;
    let mut partial = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(lines + usize::from(partial));
        }
        lines += buf.iter().filter(|b| **b == b'\n').count();
        partial = !buf.ends_with(b"\n");
        let n = buf.len();
        reader.consume(n);
    }
}

pub fn list_dir(project: &Project, args: &Value) -> anyhow::Result<String> {
    let path = opt_str(args, "path").unwrap_or(".");
    let full = project.resolve(path)?;
    let mut entries: Vec<String> = std::fs::read_dir(&full)
        .with_context(|| format!("cannot list {path}"))?
        .filter_map(Result::ok)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                format!("{name}/")
            } else {
                name
            }
        })
        .collect();
    entries.sort();
    let total = entries.len();
    entries.truncate(LIST_ENTRIES);
    let mut out = entries.join("\n");
    if total > LIST_ENTRIES {
        out.push_str(&format!(
            "\n[{total} entries, the first {LIST_ENTRIES} shown]"
        ));
    }
    if total == 0 {
        out = format!("{} is empty", project.relative(&full));
    }
    Ok(out)
}

pub fn write_file(project: &Project, args: &Value) -> anyhow::Result<String> {
    let path = str_arg(args, "path")?;
    let content = str_arg(args, "content")?;
    let full = project.resolve(path)?;
    safe_fs::write_confined(project, &full, content.as_bytes(), path)?;
    Ok(format!(
        "wrote {} bytes to {}",
        content.len(),
        project.relative(&full)
    ))
}

/// The file's text for an approval's diff, read as the tools read (confined, no symlink at the
/// end, regular files only, at most `cap` bytes): `None` when it does not exist yet.
pub fn read_for_preview(project: &Project, path: &str, cap: u64) -> anyhow::Result<Option<String>> {
    let full = project.resolve(path)?;
    if full.symlink_metadata().is_err() {
        return Ok(None);
    }
    let (mut file, size) = safe_fs::open_regular(&full, path)?;
    anyhow::ensure!(
        size <= cap,
        "{path} has {size} bytes, more than a preview reads"
    );
    let bytes =
        safe_fs::read_up_to(&mut file, cap).with_context(|| format!("cannot read {path}"))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| anyhow::anyhow!("{path} is not UTF-8 text"))
}

pub fn edit_file(project: &Project, args: &Value) -> anyhow::Result<String> {
    let path = str_arg(args, "path")?;
    let old = str_arg(args, "old_string")?;
    let new = str_arg(args, "new_string")?;
    let replace_all = opt_bool(args, "replace_all");
    anyhow::ensure!(!old.is_empty(), "old_string is empty; nothing was changed");
    let full = project.resolve(path)?;
    let (mut file, size) = safe_fs::open_regular(&full, path)?;
    anyhow::ensure!(
        size <= EDIT_BYTES,
        "{path} has {size} bytes; edit_file edits files up to {EDIT_BYTES} bytes, nothing was changed"
    );
    let mut text = String::new();
    file.read_to_string(&mut text)
        .with_context(|| format!("cannot read {path} as UTF-8 text"))?;
    let count = text.matches(old).count();
    let edited = match count {
        0 => anyhow::bail!("old_string was not found in {path}; nothing was changed"),
        1 => text.replacen(old, new, 1),
        _ if replace_all => text.replace(old, new),
        n => anyhow::bail!(
            "old_string occurs {n} times in {path}; nothing was changed. Include more surrounding \
             text to make it unique, or set replace_all"
        ),
    };
    safe_fs::write_confined(project, &full, edited.as_bytes(), path)?;
    Ok(format!(
        "edited {}: {count} replacement{}",
        project.relative(&full),
        if count == 1 { "" } else { "s" }
    ))
}

/// `Fix the login bug!` → `fix-the-login-bug`.
fn slug(title: &str) -> String {
    let mut s = String::new();
    for c in title.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            s.push(c);
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
    }
    let s: String = s.trim_end_matches('-').chars().take(60).collect();
    let s = s.trim_end_matches('-').to_owned();
    if s.is_empty() { "plan".to_owned() } else { s }
}

pub fn write_plan(project: &Project, args: &Value) -> anyhow::Result<String> {
    let title = str_arg(args, "title")?;
    let markdown = str_arg(args, "markdown")?;
    let rel = format!(".relay/plans/{}.md", slug(title));
    let body = if markdown.trim_start().starts_with('#') {
        markdown.to_owned()
    } else {
        format!("# {title}\n\n{markdown}")
    };
    // write_plan needs no approval, so it writes only inside .relay/plans/ and never through a
    // symlink: the path is not resolved (which would follow links inside the project) but walked
    // from the root, a link at any level refused.
    safe_fs::write_beneath(&project.root, Path::new(&rel), body.as_bytes(), &rel)?;
    Ok(format!("plan written to {rel}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dir: &std::path::Path, args: Value) -> String {
        let root = dir.canonicalize().unwrap();
        let p = Project {
            cwd: root.clone(),
            root,
            git_remote: None,
        };
        match read_file(&p, &args) {
            Ok(t) => t,
            Err(e) => format!("error: {e:#}"),
        }
    }

    #[test]
    fn bounded_reads_page_by_lines_and_cut_what_exceeds_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\r\ntwo\nthree").unwrap();
        let r = |args| read(dir.path(), args);
        assert_eq!(r(serde_json::json!({"path": "a.txt"})), "one\ntwo\nthree\n");
        assert_eq!(
            r(serde_json::json!({"path": "a.txt", "limit": 1})),
            "one\n[truncated: lines 0-0 of 3 shown; call read_file with offset=1 to continue]"
        );
        assert_eq!(
            r(serde_json::json!({"path": "a.txt", "offset": 2})),
            "three\n"
        );
        assert_eq!(
            r(serde_json::json!({"path": "a.txt", "offset": 3})),
            "[offset 3 is past the end: a.txt has 3 lines]"
        );
        let long = "x".repeat(READ_BYTES * 2);
        std::fs::write(dir.path().join("long.txt"), format!("{long}\nnext\n")).unwrap();
        let t = r(serde_json::json!({"path": "long.txt"}));
        assert!(t.len() < READ_BYTES + 200, "{}", t.len());
        assert!(
            t.ends_with("only its start is shown]"),
            "{}",
            &t[t.len() - 80..]
        );
        assert_eq!(
            r(serde_json::json!({"path": "long.txt", "offset": 1})),
            "next\n"
        );
        std::fs::write(dir.path().join("b.bin"), b"ab\0c").unwrap();
        assert!(r(serde_json::json!({"path": "b.bin"})).contains("binary file (4 bytes)"));
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("Fix the login bug!"), "fix-the-login-bug");
        assert_eq!(slug("../../etc"), "etc");
        assert_eq!(slug("???"), "plan");
    }
}
