//! What a write, an edit or a PDF would change, shown before it is approved: a unified diff
//! (`similar`) of the file on disk against what the call would leave there, a new file as
//! additions only. Every line is escaped (`display::line`), coloured when the terminal takes
//! colour, and wrapped to the terminal's width at spaces, so nothing is cut mid-word.

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::display::{self, Paint};
use super::project::Project;
use super::tools;

/// Bytes of the file on disk read for a preview; past it the diff is not shown.
const PREVIEW_BYTES: u64 = 1024 * 1024;
/// Diff lines shown at most; the rest is counted.
const SHOWN_LINES: usize = 400;

/// The preview of a call, as lines ready to print; `None` for tools that change no file.
pub fn preview(project: &Project, tool: &str, args: &Value, width: usize) -> Option<Vec<String>> {
    let paint = Paint::new();
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    let (path, old, new): (&str, Option<String>, String) = match tool {
        "write_file" => {
            let path = s("path")?;
            let old = match current(project, path) {
                Ok(o) => o,
                Err(e) => return Some(vec![paint.dim(&display::line(&e))]),
            };
            (path, old, s("content").unwrap_or("").to_owned())
        }
        "edit_file" => {
            let path = s("path")?;
            let old = match current(project, path) {
                Ok(Some(o)) => o,
                Ok(None) => {
                    return Some(vec![format!("{path} does not exist; the edit will fail")]);
                }
                Err(e) => return Some(vec![paint.dim(&display::line(&e))]),
            };
            let (from, to) = (s("old_string").unwrap_or(""), s("new_string").unwrap_or(""));
            let all = args.get("replace_all").and_then(Value::as_bool) == Some(true);
            let count = if from.is_empty() {
                0
            } else {
                old.matches(from).count()
            };
            let new = match count {
                0 => {
                    return Some(vec![display::line(&format!(
                        "old_string is not in {path}; the edit will fail"
                    ))]);
                }
                1 => old.replacen(from, to, 1),
                _ if all => old.replace(from, to),
                n => {
                    return Some(vec![display::line(&format!(
                        "old_string occurs {n} times in {path}; the edit will fail"
                    ))]);
                }
            };
            (path, Some(old), new)
        }
        "create_pdf" => {
            let path = s("output_path")?;
            let exists = project.resolve(path).is_ok_and(|p| p.exists());
            let mut lines = vec![paint.bold(&display::line(&format!(
                "{} {path} (PDF, from this Markdown):",
                if exists { "replaces" } else { "creates" }
            )))];
            lines.extend(render(None, s("content").unwrap_or(""), width, paint));
            return Some(lines);
        }
        _ => return None,
    };
    let mut lines = vec![paint.bold(&display::line(&format!(
        "{} {path}",
        if old.is_some() { "changes" } else { "creates" }
    )))];
    lines.extend(render(old.as_deref(), &new, width, paint));
    Some(lines)
}

/// The file's text now; `None` when it does not exist; `Err` when it cannot be shown.
fn current(project: &Project, path: &str) -> Result<Option<String>, String> {
    tools::read_for_preview(project, path, PREVIEW_BYTES).map_err(|e| format!("(no diff: {e:#})"))
}

/// The unified diff of `old` (none: a new file) against `new`, coloured and wrapped.
pub fn render(old: Option<&str>, new: &str, width: usize, paint: Paint) -> Vec<String> {
    let old = old.unwrap_or("");
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    let mut shown = 0usize;
    let mut hidden = 0usize;
    for group in diff.grouped_ops(3) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (o, n) = (first.old_range().start, first.new_range().start);
        let (ol, nl) = (last.old_range().end - o, last.new_range().end - n);
        out.push(paint.cyan(&format!("@@ -{},{ol} +{},{nl} @@", o + 1, n + 1)));
        for op in &group {
            for change in diff.iter_changes(op) {
                if shown >= SHOWN_LINES {
                    hidden += 1;
                    continue;
                }
                shown += 1;
                let (mark, colour): (char, fn(Paint, &str) -> String) = match change.tag() {
                    ChangeTag::Delete => ('-', Paint::red),
                    ChangeTag::Insert => ('+', Paint::green),
                    ChangeTag::Equal => (' ', |_, s| s.to_owned()),
                };
                let text = display::line(change.value().trim_end_matches('\n'));
                for (i, piece) in display::wrap_words(&text, width.saturating_sub(2).max(10))
                    .into_iter()
                    .enumerate()
                {
                    let lead = if i == 0 { mark } else { ' ' };
                    out.push(colour(paint, &format!("{lead} {piece}")));
                }
            }
        }
    }
    if out.is_empty() {
        out.push(paint.dim("(no change)"));
    }
    if hidden > 0 {
        out.push(paint.dim(&format!("… {hidden} more diff lines not shown")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Paint = Paint { on: false };

    #[test]
    fn a_change_is_a_hunk_with_removals_and_additions() {
        let old = "one\ntwo\nthree\n";
        let new = "one\n2\nthree\n";
        let lines = render(Some(old), new, 80, PLAIN);
        assert_eq!(
            lines,
            ["@@ -1,3 +1,3 @@", "  one", "- two", "+ 2", "  three"]
        );
        let lines = render(None, "a\nb\n", 80, PLAIN);
        assert_eq!(lines, ["@@ -1,0 +1,2 @@", "+ a", "+ b"]);
    }

    #[test]
    fn long_lines_wrap_at_spaces_and_escapes_stay() {
        let new = format!("{} \x1b[2K\n", "word ".repeat(30).trim_end());
        let lines = render(None, &new, 40, PLAIN);
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        assert!(lines.iter().skip(1).all(|l| !l.contains("wor d")));
        let body: String = lines[1..].iter().map(|l| &l[2..]).collect();
        assert!(body.ends_with("word \\x1b[2K"), "{body}");
        assert!(!lines.concat().contains('\x1b'));
    }
}
