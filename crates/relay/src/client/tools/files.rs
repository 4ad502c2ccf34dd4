//! read_file, list_dir, write_file, edit_file and write_plan: plain file work inside the project
//! root (every path goes through `Project::resolve`). A read that stops before the end says where
//! to resume (rule 1); an edit needs one exact match, or `replace_all` (rule 3), and changes nothing
//! otherwise.

use anyhow::Context;
use serde_json::Value;

use super::{opt_bool, opt_int, opt_str, str_arg};
use crate::client::project::Project;

/// Lines a read returns when the model names no limit.
const DEFAULT_LINES: usize = 2000;
/// Bytes a read returns at most, whatever the limit.
const READ_BYTES: usize = 64 * 1024;
const LIST_ENTRIES: usize = 1000;

pub fn read_file(project: &Project, args: &Value) -> anyhow::Result<String> {
    let path = str_arg(args, "path")?;
    let full = project.resolve(path)?;
    let bytes = std::fs::read(&full).with_context(|| format!("cannot read {path}"))?;
    if bytes.iter().take(8192).any(|b| *b == 0) {
        anyhow::bail!("{path} is a binary file");
    }
    let text = String::from_utf8_lossy(&bytes);
    let offset = usize::try_from(opt_int(args, "offset")?.unwrap_or(0).max(0))?;
    let limit = match opt_int(args, "limit")? {
        Some(l) if l > 0 => usize::try_from(l)?,
        _ => DEFAULT_LINES,
    };
    let lines: Vec<&str> = text.lines().collect();
    if offset >= lines.len() && !(offset == 0 && lines.is_empty()) {
        return Ok(format!(
            "[offset {offset} is past the end: {path} has {} lines]",
            lines.len()
        ));
    }
    let mut out = String::new();
    let mut next = offset;
    for line in lines.iter().skip(offset).take(limit) {
        if !out.is_empty() && out.len() + line.len() + 1 > READ_BYTES {
            break;
        }
        out.push_str(line);
        out.push('\n');
        next += 1;
    }
    if next < lines.len() {
        out.push_str(&format!(
            "[truncated: lines {offset}-{} of {} shown; call read_file with offset={next} to continue]",
            next - 1,
            lines.len()
        ));
    }
    Ok(out)
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
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&full, content).with_context(|| format!("cannot write {path}"))?;
    Ok(format!(
        "wrote {} bytes to {}",
        content.len(),
        project.relative(&full)
    ))
}

pub fn edit_file(project: &Project, args: &Value) -> anyhow::Result<String> {
    let path = str_arg(args, "path")?;
    let old = str_arg(args, "old_string")?;
    let new = str_arg(args, "new_string")?;
    let replace_all = opt_bool(args, "replace_all");
    anyhow::ensure!(!old.is_empty(), "old_string is empty; nothing was changed");
    let full = project.resolve(path)?;
    let text = std::fs::read_to_string(&full).with_context(|| format!("cannot read {path}"))?;
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
    std::fs::write(&full, edited).with_context(|| format!("cannot write {path}"))?;
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
    let full = project.resolve(&rel)?;
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let body = if markdown.trim_start().starts_with('#') {
        markdown.to_owned()
    } else {
        format!("# {title}\n\n{markdown}")
    };
    std::fs::write(&full, body).with_context(|| format!("cannot write {rel}"))?;
    Ok(format!("plan written to {rel}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("Fix the login bug!"), "fix-the-login-bug");
        assert_eq!(slug("../../etc"), "etc");
        assert_eq!(slug("???"), "plan");
    }
}
