//! Where the session's lines come from. On a terminal: rustyline, on a thread of its own (it
//! blocks), with arrows and word motions, history kept per project under the user's data folder,
//! ctrl-r reverse search, Tab completion of slash commands, and multi-line input (a line ending
//! in `\` continues; a paste keeps its line ends). Elsewhere (a pipe, a file): plain lines of
//! standard input, the prompt on standard error, a trailing `\` joining lines the same way.
//! The session prompt and the approval questions take turns on the same source.
//! On a terminal the session's status line is drawn under the message prompt as rustyline's
//! hint, so the editor redraws it with the line and clears it when the message is sent: there is
//! one on the screen, never a column of them.

use std::borrow::Cow;
use std::io::{BufRead, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::{Hint, Hinter};
use rustyline::history::{DefaultHistory, History};
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Config, Context, Editor, Helper};
use tokio::sync::{mpsc, oneshot};

/// What one read gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    Line(String),
    /// ctrl-c at the prompt.
    Interrupted,
    /// ctrl-d, or the end of the input.
    Eof,
}

/// Words Tab completes: the slash commands, then the arguments of some.
#[derive(Default)]
pub struct Words {
    pub commands: Vec<&'static str>,
    pub models: Vec<String>,
}

struct Request {
    prompt: String,
    initial: String,
    history: bool,
    footer: Option<String>,
    reply: oneshot::Sender<Read>,
}

enum Source {
    Terminal(std::sync::mpsc::Sender<Request>),
    Plain(mpsc::UnboundedReceiver<String>),
}

pub struct Input {
    source: tokio::sync::Mutex<Source>,
    pub words: Arc<Mutex<Words>>,
}

impl Input {
    /// Plain lines of standard input, read by one thread.
    pub fn plain() -> Self {
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
            source: tokio::sync::Mutex::new(Source::Plain(rx)),
            words: Arc::default(),
        }
    }

    /// The line editor, with its history in `history` (none: kept for the session only); the
    /// status line under the prompt is dim when `colour`.
    pub fn terminal(history: Option<PathBuf>, colour: bool) -> Self {
        let words: Arc<Mutex<Words>> = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel::<Request>();
        let helper = SlashHelper {
            words: words.clone(),
            footer: None,
            colour,
        };
        std::thread::spawn(move || editor_thread(helper, history, rx));
        Self {
            source: tokio::sync::Mutex::new(Source::Terminal(tx)),
            words,
        }
    }

    /// Whether lines come from the line editor (a terminal), which can show a status line.
    pub async fn is_terminal(&self) -> bool {
        matches!(*self.source.lock().await, Source::Terminal(_))
    }

    /// A message at the session prompt: `initial` is put back in the editor (a message whose
    /// turn failed), and the line goes into the history. `footer` is shown under the prompt
    /// while the message is typed (on a terminal; elsewhere the caller prints it).
    pub async fn message(&self, prompt: &str, initial: &str, footer: Option<&str>) -> Read {
        self.read(prompt, initial, true, footer).await
    }

    /// An answer to a question (an approval, a choice): not kept in the history.
    pub async fn answer(&self, prompt: &str) -> Read {
        self.read(prompt, "", false, None).await
    }

    async fn read(&self, prompt: &str, initial: &str, history: bool, footer: Option<&str>) -> Read {
        let mut source = self.source.lock().await;
        match &mut *source {
            Source::Terminal(tx) => {
                let (reply, rx) = oneshot::channel();
                let request = Request {
                    prompt: prompt.to_owned(),
                    initial: initial.to_owned(),
                    history,
                    footer: footer.map(str::to_owned),
                    reply,
                };
                if tx.send(request).is_err() {
                    return Read::Eof;
                }
                rx.await.unwrap_or(Read::Eof)
            }
            Source::Plain(rx) => {
                eprint!("{prompt}");
                let _ = std::io::stderr().flush();
                let mut joined = String::new();
                loop {
                    let Some(line) = rx.recv().await else {
                        return if joined.is_empty() {
                            Read::Eof
                        } else {
                            Read::Line(joined)
                        };
                    };
                    match line.strip_suffix('\\') {
                        Some(head) if history => {
                            joined.push_str(head);
                            joined.push('\n');
                        }
                        _ => {
                            joined.push_str(&line);
                            return Read::Line(joined);
                        }
                    }
                }
            }
        }
    }
}

/// A line ending in `\` continues on the next; the backslashes that did so are dropped.
pub fn join_continued(text: &str) -> String {
    text.replace("\\\n", "\n")
}

fn editor_thread(
    helper: SlashHelper,
    history: Option<PathBuf>,
    rx: std::sync::mpsc::Receiver<Request>,
) {
    let config = Config::builder()
        .max_history_size(5000)
        .and_then(|b| b.history_ignore_dups(true))
        .map(|b| b.auto_add_history(false).build());
    let mut editor: Editor<SlashHelper, DefaultHistory> = match config.and_then(Editor::with_config)
    {
        Ok(e) => e,
        Err(_) => return,
    };
    editor.set_helper(Some(helper));
    if let Some(path) = &history {
        // Created private before anything is written to it: it holds what the user typed.
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path);
        let _ = editor.load_history(path);
    }
    while let Ok(request) = rx.recv() {
        let footer = request.footer.is_some();
        if let Some(helper) = editor.helper_mut() {
            helper.footer = request.footer;
        }
        let outcome = if request.initial.is_empty() {
            editor.readline(&request.prompt)
        } else {
            editor.readline_with_initial(&request.prompt, (&request.initial, ""))
        };
        let read = match outcome {
            Ok(line) => {
                // Kept as typed, so the up arrow brings back the very lines, backslashes included.
                if request.history && !line.trim().is_empty() {
                    let _ = editor.history_mut().add(&line);
                    if let Some(path) = &history {
                        let _ = editor.append_history(path);
                    }
                }
                Read::Line(join_continued(&line))
            }
            Err(ReadlineError::Interrupted) => {
                // ctrl-c leaves the hint on the row above the cursor: cleared, so the next
                // prompt's status line is the only one.
                if footer {
                    print!("\x1b[1A\x1b[2K");
                    let _ = std::io::stdout().flush();
                }
                Read::Interrupted
            }
            Err(_) => Read::Eof,
        };
        if request.reply.send(read).is_err() {
            break;
        }
    }
}

struct SlashHelper {
    words: Arc<Mutex<Words>>,
    /// The status line under the message prompt, one row (cut to the terminal's width).
    footer: Option<String>,
    colour: bool,
}

/// The status line as a hint: shown on the row under the input, never inserted into it (the
/// right arrow completes a `String` hint).
struct Footer(String);

impl Hint for Footer {
    fn display(&self) -> &str {
        &self.0
    }
    fn completion(&self) -> Option<&str> {
        None
    }
}

/// The `/memory` and `/permissions` subcommands.
const MEMORY_SUBCOMMANDS: &[&str] = &["list", "add", "forget", "search"];
const ROLES: &[&str] = &["worker", "orchestrator", "agent_orchestrator", "none"];

impl Completer for SlashHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let head = &line[..pos];
        if !head.starts_with('/') {
            return Ok((0, Vec::new()));
        }
        let pair = |w: &str| Pair {
            display: w.to_owned(),
            replacement: w.to_owned(),
        };
        let Ok(words) = self.words.lock() else {
            return Ok((0, Vec::new()));
        };
        match head.split_once(' ') {
            None => Ok((
                0,
                words
                    .commands
                    .iter()
                    .filter(|c| c.starts_with(head))
                    .map(|c| pair(&format!("{c} ")))
                    .collect(),
            )),
            Some((command, arg)) if !arg.contains(' ') => {
                let options: Vec<String> = match command {
                    "/model" => words.models.clone(),
                    "/memory" => MEMORY_SUBCOMMANDS.iter().map(|s| (*s).to_owned()).collect(),
                    "/role" => ROLES.iter().map(|s| (*s).to_owned()).collect(),
                    "/permissions" => vec!["remove".to_owned()],
                    _ => Vec::new(),
                };
                Ok((
                    command.len() + 1,
                    options
                        .iter()
                        .filter(|o| o.starts_with(arg))
                        .map(|o| pair(o))
                        .collect(),
                ))
            }
            Some(_) => Ok((0, Vec::new())),
        }
    }
}

impl Hinter for SlashHelper {
    type Hint = Footer;

    fn hint(&self, _line: &str, _pos: usize, _ctx: &Context<'_>) -> Option<Footer> {
        self.footer.as_ref().map(|f| Footer(format!("\n{f}")))
    }
}

impl Highlighter for SlashHelper {
    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        if self.colour {
            Cow::Owned(format!("\x1b[2m{hint}\x1b[0m"))
        } else {
            Cow::Borrowed(hint)
        }
    }
}

impl Validator for SlashHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        // A trailing backslash asks for another line (Enter then inserts a line end).
        if ctx.input().ends_with('\\') {
            Ok(ValidationResult::Incomplete)
        } else {
            Ok(ValidationResult::Valid(None))
        }
    }
}

impl Helper for SlashHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continued_lines_lose_their_backslashes_only() {
        assert_eq!(join_continued("one\\\ntwo\\\nthree"), "one\ntwo\nthree");
        assert_eq!(join_continued("a \\n literal"), "a \\n literal");
    }

    #[test]
    fn tab_completes_commands_and_their_arguments() {
        let words = Arc::new(Mutex::new(Words {
            commands: vec!["/help", "/memory", "/model", "/exit"],
            models: vec!["auto".into(), "scripted".into()],
        }));
        let h = SlashHelper {
            words,
            footer: None,
            colour: false,
        };
        let history = DefaultHistory::new();
        let ctx = Context::new(&history);
        let (start, found) = h.complete("/m", 2, &ctx).unwrap();
        assert_eq!(start, 0);
        let shown: Vec<_> = found.iter().map(|p| p.replacement.as_str()).collect();
        assert_eq!(shown, ["/memory ", "/model "]);
        let (start, found) = h.complete("/model sc", 9, &ctx).unwrap();
        assert_eq!((start, found[0].replacement.as_str()), (7, "scripted"));
        let (_, found) = h.complete("/memory f", 9, &ctx).unwrap();
        assert_eq!(found[0].replacement, "forget");
        assert!(h.complete("hello", 5, &ctx).unwrap().1.is_empty());
    }
}
