//! grep and find_files: project-wide, no path argument (rule 2), `.gitignore` respected, built on
//! the crates ripgrep is made of (`ignore` for the walk, `grep-regex`/`grep-searcher` for the
//! search, `globset` for patterns). Results are capped, with a note when cut.

use grep_regex::RegexMatcher;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde_json::Value;

use super::str_arg;
use crate::client::project::Project;

const GREP_MATCHES: usize = 200;
const FIND_PATHS: usize = 500;
const LINE_CHARS: usize = 300;

/// The project's files: hidden ones included (like `.github/`), `.git/` and ignored ones not, and
/// `.gitignore` honoured even where the root is not a git work tree.
fn walk(project: &Project) -> impl Iterator<Item = ignore::DirEntry> {
    ignore::WalkBuilder::new(&project.root)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
}

pub fn grep(project: &Project, args: &Value) -> anyhow::Result<String> {
    let pattern = str_arg(args, "pattern")?;
    let matcher = RegexMatcher::new(pattern)
        .map_err(|e| anyhow::anyhow!("invalid regular expression: {e}"))?;
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .line_number(true)
        .build();
    let mut hits: Vec<String> = Vec::new();
    let mut more = false;
    for entry in walk(project) {
        let rel = project.relative(entry.path());
        let result = searcher.search_path(
            &matcher,
            entry.path(),
            UTF8(|line_number, line| {
                if hits.len() >= GREP_MATCHES {
                    more = true;
                    return Ok(false);
                }
                let text = line.trim_end_matches(['\n', '\r']);
                let text: String = text.chars().take(LINE_CHARS).collect();
                hits.push(format!("{rel}:{line_number}:{text}"));
                Ok(true)
            }),
        );
        // A file that is not UTF-8 text or vanished mid-walk is skipped, not fatal.
        let _ = result;
        if more {
            break;
        }
    }
    if hits.is_empty() {
        return Ok(format!("no matches for {pattern}"));
    }
    let mut out = hits.join("\n");
    if more {
        out.push_str(&format!(
            "\n[results cut at {GREP_MATCHES} matches; narrow the pattern]"
        ));
    }
    Ok(out)
}

pub fn find_files(project: &Project, args: &Value) -> anyhow::Result<String> {
    let pattern = str_arg(args, "pattern")?;
    let glob = globset::Glob::new(pattern)
        .map_err(|e| anyhow::anyhow!("invalid glob pattern: {e}"))?
        .compile_matcher();
    let mut paths: Vec<String> = walk(project)
        .map(|e| project.relative(e.path()))
        .filter(|rel| {
            // `*.rs` should find `src/main.rs` too: a pattern without `/` also matches file names.
            glob.is_match(rel)
                || (!pattern.contains('/')
                    && std::path::Path::new(rel)
                        .file_name()
                        .is_some_and(|n| glob.is_match(n)))
        })
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Ok(format!("no files match {pattern}"));
    }
    let total = paths.len();
    paths.truncate(FIND_PATHS);
    let mut out = paths.join("\n");
    if total > FIND_PATHS {
        out.push_str(&format!(
            "\n[{total} files match, the first {FIND_PATHS} shown]"
        ));
    }
    Ok(out)
}
