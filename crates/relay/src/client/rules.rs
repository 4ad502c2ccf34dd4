//! Permission rules: what an "always" answer allows, written as Claude Code writes them.
//! `Bash(cargo test:*)` allows a command whose program and subcommand are `cargo test`, whatever
//! follows; `Bash(touch:*)` a program that has no subcommands; `Write(src/lib.rs)` writes, edits
//! and PDFs to that one file; `Tool(open_pane)` every call of a tool that has neither (panes,
//! agents). A command joined with others (`&&`, `;`, `|`) is allowed only when every part is;
//! one with a substitution or redirection (`$(`, a backquote, `>`, `<`) never is by a rule.

use std::fmt;

use serde_json::Value;

/// Programs whose first word names what they do (`git push` is not `git status`).
const WITH_SUBCOMMANDS: &[&str] = &[
    "apt",
    "apt-get",
    "brew",
    "bun",
    "bundle",
    "cargo",
    "composer",
    "deno",
    "docker",
    "dotnet",
    "gem",
    "gh",
    "git",
    "go",
    "gradle",
    "helm",
    "kubectl",
    "make",
    "mvn",
    "npm",
    "npx",
    "pip",
    "pip3",
    "pnpm",
    "poetry",
    "rustup",
    "systemctl",
    "terraform",
    "uv",
    "yarn",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// `Bash(prefix:*)`: the program, and its subcommand where it has them.
    Command(String),
    /// `Write(path)`: one file, as the model named it relative to the root.
    Write(String),
    /// `Tool(name)`: every call of the tool.
    Tool(String),
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Command(p) => write!(f, "Bash({p}:*)"),
            Self::Write(p) => write!(f, "Write({p})"),
            Self::Tool(t) => write!(f, "Tool({t})"),
        }
    }
}

impl Rule {
    /// `Bash(cargo test:*)`, `Bash(cargo test)`, `Write(path)`, `Tool(name)`.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (kind, rest) = s.split_once('(')?;
        let inner = rest.strip_suffix(')')?.trim();
        if inner.is_empty() {
            return None;
        }
        match kind.trim() {
            "Bash" => {
                let prefix = inner.strip_suffix(":*").unwrap_or(inner).trim();
                let words: Vec<&str> = prefix.split_whitespace().collect();
                (!words.is_empty()).then(|| Self::Command(words.join(" ")))
            }
            "Write" | "Edit" => Some(Self::Write(normalise(inner))),
            "Tool" => Some(Self::Tool(inner.to_owned())),
            _ => None,
        }
    }

    /// The rule an "always" for this call would add: `None` when the call has no safe scope (a
    /// command with a substitution or redirection).
    pub fn scope(tool: &str, args: &Value) -> Vec<Self> {
        match tool {
            "run_command" => {
                let command = args.get("command").and_then(Value::as_str).unwrap_or("");
                match segments(command) {
                    Some(parts) => {
                        let mut rules: Vec<Self> = Vec::new();
                        for p in parts {
                            let r = Self::Command(prefix(&p));
                            if !rules.contains(&r) {
                                rules.push(r);
                            }
                        }
                        rules
                    }
                    None => Vec::new(),
                }
            }
            "write_file" | "edit_file" => path_arg(args, "path")
                .map(|p| vec![Self::Write(p)])
                .unwrap_or_default(),
            "create_pdf" => path_arg(args, "output_path")
                .map(|p| vec![Self::Write(p)])
                .unwrap_or_default(),
            other => vec![Self::Tool(other.to_owned())],
        }
    }
}

/// Whether `rules` allow this call.
pub fn allows(rules: &[Rule], tool: &str, args: &Value) -> bool {
    match tool {
        "run_command" => {
            let command = args.get("command").and_then(Value::as_str).unwrap_or("");
            let Some(parts) = segments(command) else {
                return false;
            };
            !parts.is_empty()
                && parts.iter().all(|part| {
                    let words: Vec<&str> = part.split_whitespace().collect();
                    rules.iter().any(|r| match r {
                        Rule::Command(p) => {
                            let want: Vec<&str> = p.split_whitespace().collect();
                            words.len() >= want.len() && words[..want.len()] == want[..]
                        }
                        _ => false,
                    })
                })
        }
        "write_file" | "edit_file" | "create_pdf" => {
            let key = if tool == "create_pdf" {
                "output_path"
            } else {
                "path"
            };
            path_arg(args, key).is_some_and(|p| rules.contains(&Rule::Write(p)))
        }
        other => rules.contains(&Rule::Tool(other.to_owned())),
    }
}

fn path_arg(args: &Value, key: &str) -> Option<String> {
    args.get(key)
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .map(normalise)
}

/// `./src//lib.rs` and `src/lib.rs` are one file for a rule.
fn normalise(p: &str) -> String {
    p.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// The simple commands of `command` split at `&&`, `||`, `;`, `|` and line ends; `None` when it
/// holds anything a prefix cannot vouch for: a substitution, a redirection, a background `&`, a
/// subshell, an assignment before the program, or a quote (which could hide any of those).
fn segments(command: &str) -> Option<Vec<String>> {
    if command
        .chars()
        .any(|c| matches!(c, '`' | '$' | '>' | '<' | '(' | ')' | '\'' | '"' | '\\'))
    {
        return None;
    }
    let mut parts = Vec::new();
    let normalised = command
        .replace("&&", "\n")
        .replace("||", "\n")
        .replace([';', '|'], "\n");
    if normalised.contains('&') {
        return None;
    }
    for part in normalised.lines() {
        let part = part.split_whitespace().collect::<Vec<_>>().join(" ");
        if part.is_empty() {
            continue;
        }
        if part.split(' ').next().is_some_and(|w| w.contains('=')) {
            return None;
        }
        parts.push(part);
    }
    (!parts.is_empty()).then_some(parts)
}

/// `cargo test --release` → `cargo test`; `touch a` → `touch`.
fn prefix(part: &str) -> String {
    let mut words = part.split(' ');
    let program = words.next().unwrap_or("");
    let name = program.rsplit('/').next().unwrap_or(program);
    match words.next() {
        Some(sub)
            if WITH_SUBCOMMANDS.contains(&name)
                && !sub.starts_with('-')
                && sub
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':') =>
        {
            format!("{program} {sub}")
        }
        _ => program.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cmd(c: &str) -> Value {
        json!({ "command": c })
    }

    #[test]
    fn always_for_cargo_test_allows_cargo_test_only() {
        let rules = Rule::scope("run_command", &cmd("cargo test -p relay"));
        assert_eq!(rules, [Rule::Command("cargo test".into())]);
        assert_eq!(rules[0].to_string(), "Bash(cargo test:*)");
        assert!(allows(&rules, "run_command", &cmd("cargo test --release")));
        assert!(allows(&rules, "run_command", &cmd("cargo  test")));
        assert!(!allows(&rules, "run_command", &cmd("cargo publish")));
        assert!(!allows(&rules, "run_command", &cmd("rm -rf target")));
        assert!(!allows(
            &rules,
            "run_command",
            &cmd("cargo test && rm -rf /")
        ));
        assert!(!allows(
            &rules,
            "run_command",
            &cmd("cargo test $(rm -rf /)")
        ));
        assert!(!allows(
            &rules,
            "run_command",
            &cmd("cargo test > ~/.bashrc")
        ));
        assert!(!allows(&rules, "run_command", &cmd("cargo test & rm x")));
        assert!(!allows(&rules, "run_command", &cmd("cargo testing")));
        assert!(!allows(&rules, "write_file", &json!({"path": "a"})));
    }

    #[test]
    fn compound_commands_need_every_part_allowed() {
        let rules = Rule::scope("run_command", &cmd("git status && ls -la | wc -l"));
        assert_eq!(
            rules.iter().map(Rule::to_string).collect::<Vec<_>>(),
            ["Bash(git status:*)", "Bash(ls:*)", "Bash(wc:*)"]
        );
        assert!(allows(&rules, "run_command", &cmd("ls src; git status")));
        assert!(!allows(&rules, "run_command", &cmd("ls; git push")));
        assert!(Rule::scope("run_command", &cmd("echo $(id)")).is_empty());
        assert!(Rule::scope("run_command", &cmd("FOO=1 ls")).is_empty());
    }

    #[test]
    fn writes_are_scoped_to_one_file() {
        let rules = Rule::scope("edit_file", &json!({"path": "./src/lib.rs"}));
        assert_eq!(rules[0].to_string(), "Write(src/lib.rs)");
        assert!(allows(&rules, "write_file", &json!({"path": "src/lib.rs"})));
        assert!(!allows(
            &rules,
            "write_file",
            &json!({"path": "src/main.rs"})
        ));
        assert!(!allows(&rules, "run_command", &cmd("ls")));
    }

    #[test]
    fn rules_parse_back_from_their_text() {
        for r in [
            Rule::Command("cargo test".into()),
            Rule::Write("a/b.rs".into()),
            Rule::Tool("open_pane".into()),
        ] {
            assert_eq!(Rule::parse(&r.to_string()), Some(r));
        }
        assert_eq!(
            Rule::parse("Bash(npm run lint)"),
            Some(Rule::Command("npm run lint".into()))
        );
        assert_eq!(Rule::parse("Bash()"), None);
        assert_eq!(Rule::parse("Nope(x)"), None);
    }
}
