//! Asking before a tool changes something: writes, edits, PDFs, commands and panes. With `--yes` they
//! run; on a terminal (or in an interactive session) the user answers y, n or always (for this tool,
//! for the rest of the session); with `-p`, no `--yes` and no terminal nobody can answer, so they are
//! not run and the model is told why. Confinement to the project root is separate and always applies.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::Mutex;

use tokio::sync::mpsc;

use super::display;

/// Arguments up to this many characters share the prompt's line; longer ones are wrapped at it.
const PROMPT_WIDTH: usize = 160;

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

/// Lines of standard input, read by one thread so the session prompt and the approval questions
/// take turns on the same stream.
pub struct Input {
    rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>,
}

impl Input {
    pub fn stdin() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            rx: tokio::sync::Mutex::new(rx),
        }
    }

    /// The next line, or `None` at the end of input.
    pub async fn line(&self) -> Option<String> {
        self.rx.lock().await.recv().await
    }
}

pub struct Approvals {
    policy: Policy,
    always: Mutex<HashSet<String>>,
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
            always: Mutex::new(HashSet::new()),
        }
    }

    /// `Ok` to run it; `Err(text)` is the result to send instead.
    pub async fn check(&self, input: &Input, tool: &str, detail: &str) -> Result<(), String> {
        if !needs_approval(tool) {
            return Ok(());
        }
        match self.policy {
            Policy::Yes => return Ok(()),
            Policy::Refuse => return Err(REFUSED_NO_TERMINAL.to_owned()),
            Policy::Ask => {}
        }
        if self
            .always
            .lock()
            .map(|s| s.contains(tool))
            .unwrap_or(false)
        {
            return Ok(());
        }
        // `detail` is already escaped to one line; a long one is shown whole over several lines.
        let shown = display::line(tool);
        loop {
            if detail.chars().count() <= PROMPT_WIDTH {
                eprint!("allow {shown} {detail}? [y/n/always] ");
            } else {
                eprintln!("allow {shown} with these arguments (shown whole, wrapped):");
                for piece in display::wrap(detail, PROMPT_WIDTH) {
                    eprintln!("  {piece}");
                }
                eprint!("allow {shown}? [y/n/always] ");
            }
            let _ = std::io::stderr().flush();
            let Some(answer) = input.line().await else {
                return Err(DECLINED.to_owned());
            };
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return Ok(()),
                "n" | "no" => return Err(DECLINED.to_owned()),
                "a" | "always" => {
                    if let Ok(mut s) = self.always.lock() {
                        s.insert(tool.to_owned());
                    }
                    return Ok(());
                }
                _ => eprintln!("answer y, n or always"),
            }
        }
    }
}
