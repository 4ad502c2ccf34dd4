//! The README's blocks marked as examples (```` ```toml example ````, ```` ```sh example ````) work
//! when pasted (issue 42): each TOML block is a Relay configuration that loads, and each `relay …`
//! line of a shell block names a command the binary has, with flags it takes.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::path::Path;
use std::process::Command;

/// The marked blocks of `lang`: (the line the block starts on, its text).
fn examples(lang: &str) -> Vec<(usize, String)> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let opening = format!("```{lang} example");
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in readme.lines().enumerate() {
        match &mut current {
            None if line.trim_end() == opening => current = Some((n + 1, String::new())),
            None => {}
            Some(_) if line.starts_with("```") => out.extend(current.take()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    assert!(current.is_none(), "an unclosed {lang} example");
    out
}

#[test]
fn every_toml_example_is_a_configuration_relay_loads() {
    let blocks = examples("toml");
    assert!(
        blocks.len() >= 4,
        "the quick start's blocks are marked: {blocks:?}"
    );
    for (line, text) in blocks {
        let config = relay_server::config::Config::from_toml(&text, Path::new("README.md"))
            .unwrap_or_else(|e| panic!("README.md line {line}: {e}\n{text}"));
        config
            .validate()
            .unwrap_or_else(|e| panic!("README.md line {line}: {e}\n{text}"));
    }
}

/// Words of a shell line, with double-quoted strings kept whole, up to a `#` comment.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted && word.is_empty() => break,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

#[test]
fn every_relay_line_of_a_shell_example_names_real_commands_and_flags() {
    let mut checked = 0;
    for (start, text) in examples("sh") {
        for (i, line) in text.lines().enumerate() {
            let words = words(line);
            if words.first().map(String::as_str) != Some("relay") {
                continue;
            }
            // The subcommand path: leading lower-case words, after a global `--config FILE`.
            let mut rest = words[1..].iter().peekable();
            let mut path: Vec<&str> = Vec::new();
            while let Some(w) = rest.next() {
                if w == "--config" {
                    rest.next();
                } else if w.chars().all(|c| c.is_ascii_lowercase()) {
                    path.push(w);
                } else {
                    break;
                }
            }
            let out = Command::new(env!("CARGO_BIN_EXE_relay"))
                .args(&path)
                .arg("--help")
                .env_remove("RELAY_CONFIG")
                .output()
                .unwrap();
            let help = String::from_utf8_lossy(&out.stdout);
            let at = start + i + 1;
            assert!(out.status.success(), "README.md line {at}: `{line}`");
            for flag in words
                .iter()
                .filter(|w| w.starts_with('-') && *w != "--config")
            {
                assert!(
                    help.contains(flag.as_str()),
                    "README.md line {at}: `relay {}` has no {flag}:\n{help}",
                    path.join(" ")
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked} relay lines checked");
}
