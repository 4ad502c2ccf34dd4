//! Asking before a tool changes something: writes, edits, PDFs, commands and panes. With `--yes` they
//! run; a call a permission rule allows runs (rules come from "always" answers and from the
//! project's `.relay/settings.toml`, once the user accepted it); on a terminal (or in an
//! interactive session) the user answers y, n or always, after seeing the call whole and, for a
//! write, the diff it would make. "always" adds a scoped rule (`Bash(cargo test:*)`, `Write(path)`),
//! never one for every call of the tool. With `-p`, no `--yes` and no terminal nobody can answer,
//! so a call no rule allows is not run and the model is told why. Confinement to the project root
//! is separate and always applies.

use std::sync::Mutex;

use serde_json::Value;

use super::diff;
use super::display::{self, Paint};
use super::editor::{Input, Read};
use super::project::Project;
use super::rules::{self, Rule};

/// Tools that change files, run programs or drive panes.
pub fn needs_approval(tool: &str) -> bool {
    matches!(
        tool,
        "write_file"
            | "edit_file"
            | "create_pdf"
            | "run_command"
            | "open_pane"
            | "spawn_agent"
            | "send_keys"
            | "send_agent"
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `--yes`.
    Yes,
    /// Ask the user, reading the answer from the input lines.
    Ask,
    /// `-p` without `--yes` and without a terminal.
    Refuse,
}

/// A rule in force, and where it came from.
#[derive(Debug, Clone)]
pub struct Allowed {
    pub rule: Rule,
    pub source: &'static str,
}

pub struct Approvals {
    policy: Policy,
    rules: Mutex<Vec<Allowed>>,
}

/// Why a call was not run, for the model.
pub const REFUSED_NO_TERMINAL: &str = "not run: this call needs the user's approval, and relay runs \
     non-interactively (-p without --yes, no terminal), so nobody could approve it. Do not retry it; \
     say what you would have done instead.";
pub const DECLINED: &str = "not run: the user declined this call.";

impl Approvals {
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            rules: Mutex::new(Vec::new()),
        }
    }

    pub fn add(&self, rule: Rule, source: &'static str) {
        if let Ok(mut rules) = self.rules.lock()
            && !rules.iter().any(|a| a.rule == rule)
        {
            rules.push(Allowed { rule, source });
        }
    }

    pub fn list(&self) -> Vec<Allowed> {
        self.rules.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Removes the `n`th rule (from 1, as `/permissions` numbers them).
    pub fn remove(&self, n: usize) -> Option<Allowed> {
        let mut rules = self.rules.lock().ok()?;
        (n >= 1 && n <= rules.len()).then(|| rules.remove(n - 1))
    }

    fn allowed_by(&self, tool: &str, args: &Value) -> Option<Rule> {
        let rules = self.rules.lock().ok()?;
        let all: Vec<Rule> = rules.iter().map(|a| a.rule.clone()).collect();
        if !rules::allows(&all, tool, args) {
            return None;
        }
        // The rule to name: the first that allows the call on its own, else the first in force.
        all.iter()
            .find(|r| rules::allows(std::slice::from_ref(r), tool, args))
            .or(all.first())
            .cloned()
    }

    /// `Ok` to run it; `Err(text)` is the result to send instead.
    pub async fn check(
        &self,
        input: &Input,
        project: &Project,
        tool: &str,
        raw: &str,
    ) -> Result<(), String> {
        if !needs_approval(tool) || self.policy == Policy::Yes {
            return Ok(());
        }
        let args: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
        let paint = Paint::new();
        if let Some(rule) = self.allowed_by(tool, &args) {
            eprintln!(
                "{}",
                paint.dim(&format!(
                    "  allowed by {}",
                    display::line(&rule.to_string())
                ))
            );
            return Ok(());
        }
        if self.policy == Policy::Refuse {
            return Err(REFUSED_NO_TERMINAL.to_owned());
        }
        let width = display::width();
        let shown = display::line(tool);
        let target = args
            .get(if tool == "create_pdf" {
                "output_path"
            } else {
                "path"
            })
            .and_then(Value::as_str);
        let preview = diff::preview(project, tool, &args, width);
        let scope = Rule::scope(tool, &args);
        let choices = "[y/n/always]";
        // What "always" would mean comes first, then the diff or the arguments, then the question.
        let names: Vec<String> = scope
            .iter()
            .map(|r| display::line(&r.to_string()))
            .collect();
        eprintln!(
            "{}",
            paint.dim(&if names.is_empty() {
                "  always = not available: no rule can cover this call safely".to_owned()
            } else {
                format!("  always = allow {} for this session", names.join(", "))
            })
        );
        // `detail` is escaped to one line; a long one is shown whole over several lines.
        let detail = display::line(raw);
        let prompt = match (&preview, target) {
            (Some(lines), Some(path)) => {
                for l in lines {
                    eprintln!("{l}");
                }
                format!("allow {shown} {}? {choices} ", display::line(path))
            }
            _ if detail.chars().count() + shown.chars().count() + 24 <= width => {
                format!("allow {shown} {detail}? {choices} ")
            }
            _ => {
                eprintln!("allow {shown} with these arguments (shown whole, wrapped):");
                for piece in display::wrap_words(&detail, width.saturating_sub(2).max(10)) {
                    eprintln!("  {piece}");
                }
                format!("allow {shown}? {choices} ")
            }
        };
        loop {
            let answer = match input.answer(&prompt).await {
                Read::Line(l) => l,
                Read::Interrupted | Read::Eof => return Err(DECLINED.to_owned()),
            };
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return Ok(()),
                "n" | "no" => return Err(DECLINED.to_owned()),
                "a" | "always" if !scope.is_empty() => {
                    for rule in scope {
                        eprintln!(
                            "{}",
                            paint.dim(&format!(
                                "  added {} (/permissions lists and removes rules)",
                                display::line(&rule.to_string())
                            ))
                        );
                        self.add(rule, "session");
                    }
                    return Ok(());
                }
                "a" | "always" => eprintln!(
                    "no rule can cover this call safely (a substitution, redirection or quote); answer y or n"
                ),
                _ => eprintln!("answer y, n or always"),
            }
        }
    }
}
