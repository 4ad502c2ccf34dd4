//! `relay agent`: the round trip of spec §3 in a terminal. A leg is sent with the conversation and
//! the role's tools; text streams in; when the leg ends with `tool_calls` every call is run here,
//! in order, and answered with exactly one `tool` message by id; the next leg goes out, until
//! `done`. With `-p` one task runs to its end (answer on stdout, activity on stderr); without it the
//! session is interactive (`interactive.rs`), and ctrl-c cancels the running leg, not the session.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::sync::Arc;

use clap::Args;
use futures::StreamExt;
use relay_client::{AgentEvent, Client};
use relay_wire::agent::{AgentRequest, Content, Message, MessageRole, MessageToolCall, ToolCall};
use relay_wire::tools::{ToolDef, ToolRole};

use super::approval::{Approvals, Policy};
use super::display::{self, Paint};
use super::editor::Input;
use super::highlight::Grammars;
use super::live::{Spinner, Totals};
use super::markdown::Markdown;
use super::project::Project;
pub use super::role::{Role, parse_role, role_name};
use super::sessions::{Saved, Store};
use super::tools::{self, Ctx};
use super::{connect, explain, server_url, settings};

/// A conversation never runs more legs than this on one message, so a model that loops on tool
/// calls cannot spend the whole quota.
const MAX_LEGS: usize = 100;
/// Characters of a call's arguments on its activity line (the approval prompt shows them all).
const SUMMARY_CHARS: usize = 200;

#[derive(Args)]
pub struct AgentArgs {
    /// First message of an interactive session (with -p, use -p instead).
    task: Option<String>,
    /// Run this task to its end without a terminal UI: the answer on stdout, tool activity on stderr.
    #[arg(short = 'p', long = "prompt")]
    prompt: Option<String>,
    /// Run writes, edits, commands and panes without asking.
    #[arg(long)]
    yes: bool,
    /// Which tools the agent gets (spec §2.9): an interactive session uses `worker` (base tools
    /// plus remember and recall), `-p` the base set; `base` asks for the base set.
    #[arg(long, value_enum)]
    role: Option<Role>,
    /// A configured model name; `auto` when absent.
    #[arg(long)]
    model: Option<String>,
    /// The relay; else RELAY_URL, else http://127.0.0.1:7711.
    #[arg(long)]
    server: Option<String>,
    /// Continue the last conversation in this project.
    #[arg(short = 'c', long = "continue", conflicts_with = "prompt")]
    continue_last: bool,
    /// Resume a saved conversation of this project: by id, or picked from a list.
    #[arg(long, num_args = 0..=1, default_missing_value = "", conflicts_with = "prompt")]
    resume: Option<String>,
}

pub(super) struct Session {
    pub server: String,
    pub client: Client,
    pub ctx: Arc<Ctx>,
    pub approvals: Approvals,
    pub input: Arc<Input>,
    pub tools: Vec<ToolDef>,
    pub offered: HashSet<String>,
    pub role: Option<ToolRole>,
    pub model: Option<String>,
    pub messages: Vec<Message>,
    /// Interactive: text streams to stdout as it comes. Print mode: the final answer only.
    pub interactive: bool,
    pub paint: Paint,
    pub totals: Totals,
    /// The model of the last leg, for the status line.
    pub last_model: Option<String>,
    /// The start line last shown (interactive: shown again only when it changes).
    pub shown_start: Option<String>,
    /// Where the conversation is kept (interactive sessions).
    pub store: Option<Store>,
    pub saved: Option<Saved>,
    /// The status line under the prompt (a terminal); `None` before the first answer.
    pub footer: Option<String>,
    /// The code blocks' grammars, loaded when an answer first has one.
    pub grammars: Grammars,
}

pub fn message(role: MessageRole, text: String) -> Message {
    Message {
        role,
        content: Some(Content::Text(text)),
        tool_calls: None,
        tool_call_id: None,
    }
}

pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let server = server_url(args.server);
    let client = connect(&server)?;
    let project = Project::detect()?;
    let interactive = args.prompt.is_none();
    // Memory by default where someone is there to use it; `-p` keeps the base set it always had.
    let role = match args.role {
        Some(r) => r.tool_role(),
        None if interactive => Some(ToolRole::Worker),
        None => None,
    };
    let policy = if args.yes {
        Policy::Yes
    } else if interactive || std::io::stdin().is_terminal() {
        Policy::Ask
    } else {
        Policy::Refuse
    };
    // The line editor where a person types; plain lines of standard input elsewhere.
    let terminal = interactive && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    // ctrl-c's handler is installed before the line editor first runs: rustyline swaps in its
    // own for each read and puts back the one it found, which must be tokio's (installed for the
    // rest of the process), or a later ctrl-c during an answer would kill the session.
    let _interrupts = if interactive {
        Some(tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::interrupt(),
        )?)
    } else {
        None
    };
    let input = if terminal {
        let history = super::sessions::data_dir().ok().and_then(|d| {
            let dir = d.join("history");
            super::sessions::private_dir(&dir).ok()?;
            Some(dir.join(project.id()))
        });
        Input::terminal(history, display::styled())
    } else {
        Input::plain()
    };
    let system = format!(
        "You are relay's coding agent, working in the project at {} (current directory {}). \
         Use the tools to look at and change the project; paths are relative to the project root.",
        project.root_str(),
        project.cwd_str()
    );
    let store = if interactive {
        Some(Store::for_project(&project.id())?)
    } else {
        None
    };
    let approvals = Approvals::new(policy);
    if policy != Policy::Yes {
        let asker = (policy == Policy::Ask).then_some(&input);
        match settings::allowed(&project, asker).await {
            Ok(rules) => rules
                .into_iter()
                .for_each(|r| approvals.add(r, settings::SOURCE)),
            Err(e) => eprintln!(
                "relay: {}; its rules are ignored",
                display::line(&format!("{e:#}"))
            ),
        }
    }
    let mut session = Session {
        ctx: Arc::new(Ctx {
            project,
            client: client.clone(),
            server: server.clone(),
        }),
        server,
        client,
        approvals,
        input: Arc::new(input),
        offered: HashSet::new(),
        tools: Vec::new(),
        role,
        model: args.model.clone(),
        messages: vec![message(MessageRole::System, system)],
        interactive,
        paint: Paint::new(),
        totals: Totals::default(),
        last_model: None,
        shown_start: None,
        store,
        saved: None,
        footer: None,
        grammars: Grammars::default(),
    };
    match args.prompt {
        Some(prompt) => {
            session.set_role(role).await?;
            let prompt = match args.task {
                Some(extra) => format!("{prompt} {extra}"),
                None => prompt,
            };
            session.messages.push(message(MessageRole::User, prompt));
            session.turn().await
        }
        None => {
            let resume = if args.continue_last {
                Some(super::interactive::Resume::Last)
            } else {
                args.resume.map(super::interactive::Resume::Pick)
            };
            session
                .interact(args.task, resume, args.role.is_some(), args.model.is_some())
                .await
        }
    }
}

impl Session {
    pub fn note(&self, text: &str) {
        eprintln!("{}", self.paint.dim(text));
    }

    /// Fetches the tools of `role` and makes it the session's.
    pub async fn set_role(&mut self, role: Option<ToolRole>) -> anyhow::Result<()> {
        let tools = self
            .client
            .tools(role)
            .await
            .map_err(|e| explain(&self.server, e))?;
        self.offered = tools.iter().map(|t| t.name.clone()).collect();
        self.tools = tools;
        self.role = role;
        Ok(())
    }

    fn request(&self) -> AgentRequest {
        let p = &self.ctx.project;
        AgentRequest {
            messages: self.messages.clone(),
            tools: self.tools.clone(),
            tool_role: self.role,
            model: self.model.clone(),
            cwd: Some(p.cwd_str()),
            root: Some(p.root_str()),
            git_remote: p.git_remote.clone(),
            ..AgentRequest::default()
        }
    }

    fn start_line(&mut self, model: &str, project_id: Option<&str>, notes: u32) {
        let line = format!(
            "[relay] model {}, project {}, {notes} notes injected",
            display::line(model),
            display::line(project_id.unwrap_or("none"))
        );
        // A session shows it when it changes; `-p` logs every leg's, as it always did.
        if !self.interactive || self.shown_start.as_deref() != Some(line.as_str()) {
            self.note(&line);
            self.shown_start = Some(line);
        }
    }

    /// Legs until `done`; the conversation grows by the assistant's messages and the tool results.
    pub async fn turn(&mut self) -> anyhow::Result<()> {
        // The tool calls this turn ran: a leg refused afterwards (quota, budget) says what ran.
        let mut ran: Vec<String> = Vec::new();
        for _ in 0..MAX_LEGS {
            let label = format!(
                "waiting for {}",
                display::line(self.model.as_deref().unwrap_or("the model"))
            );
            let spinner = Spinner::start(label, self.interactive);
            let mut stream = match self.client.leg(&self.request()).await {
                Ok(stream) => stream,
                Err(e) => return Err(refused_part_way(explain(&self.server, e), &ran)),
            };
            let mut text = String::new();
            let mut calls: Option<Vec<ToolCall>> = None;
            // Markdown rendered on a colour terminal; plain escaped text elsewhere.
            let mut markdown = (self.interactive && self.paint.on)
                .then(|| Markdown::new(self.paint, display::width(), self.grammars.clone()));
            // Reasoning is printed without line ends as it streams; the answer starts on a line of its own.
            let mut thinking = false;
            while let Some(event) = stream.next().await {
                let event = event.map_err(|e| explain(&self.server, e))?;
                if !matches!(event, AgentEvent::Start { .. } | AgentEvent::Ping) {
                    spinner.stop();
                }
                if thinking && !matches!(event, AgentEvent::Reasoning { .. } | AgentEvent::Ping) {
                    eprintln!();
                    thinking = false;
                }
                match event {
                    AgentEvent::Start {
                        model,
                        project_id,
                        notes,
                        request_id,
                        ..
                    } => {
                        spinner.stop();
                        self.start_line(&model, project_id.as_deref(), notes);
                        self.totals.request_ids.push(request_id);
                        self.last_model = Some(model);
                    }
                    AgentEvent::Text { text: piece } => {
                        if self.interactive {
                            match markdown.as_mut() {
                                Some(m) => print!("{}", m.push(&piece)),
                                None => print!("{}", display::text(&piece)),
                            }
                            let _ = std::io::stdout().flush();
                        }
                        text.push_str(&piece);
                    }
                    AgentEvent::Reasoning { text, .. } => {
                        self.reasoning(&text);
                        thinking = true;
                    }
                    AgentEvent::ToolCalls { calls: c, usage } => {
                        self.totals.add(&usage);
                        calls = Some(c);
                    }
                    AgentEvent::Done { usage, .. } => self.totals.add(&usage),
                    AgentEvent::Error { error, message, .. } => {
                        anyhow::bail!(
                            "the relay reported an error during the leg ({}): {}",
                            display::line(&error.to_string()),
                            display::line(&message)
                        )
                    }
                    AgentEvent::Ping => {}
                }
            }
            spinner.stop();
            if let Some(m) = markdown.as_mut() {
                print!("{}", m.finish());
            }
            let Some(calls) = calls else {
                if self.interactive {
                    println!();
                } else {
                    println!("{}", display::text(text.trim_end()));
                }
                self.messages.push(message(MessageRole::Assistant, text));
                return Ok(());
            };
            if !self.interactive && !text.trim().is_empty() {
                eprintln!("{}", display::text(text.trim_end()));
            } else if self.interactive && !text.is_empty() {
                println!();
            }
            self.messages.push(Message {
                role: MessageRole::Assistant,
                content: (!text.is_empty()).then_some(Content::Text(text)),
                tool_calls: Some(calls.iter().cloned().map(MessageToolCall::Flat).collect()),
                tool_call_id: None,
            });
            for call in calls {
                let result = self.call(&call).await;
                ran.push(format!(
                    "{} {}",
                    display::line(&call.name),
                    tools::summary(&call.arguments, SUMMARY_CHARS)
                ));
                self.messages.push(Message {
                    role: MessageRole::Tool,
                    content: Some(Content::Text(result)),
                    tool_calls: None,
                    tool_call_id: Some(call.id),
                });
            }
        }
        anyhow::bail!("stopped after {MAX_LEGS} legs without a final answer")
    }

    fn reasoning(&self, text: &str) {
        let text = display::text(text);
        if self.paint.on {
            eprint!("\x1b[2m{text}\x1b[0m");
        } else {
            eprint!("{text}");
        }
        let _ = std::io::stderr().flush();
    }

    /// One call's result: offered, approved, run.
    async fn call(&self, call: &ToolCall) -> String {
        // Everything the model wrote is escaped before it reaches the terminal; the activity line
        // may cut the arguments (and says so), the approval prompt shows them whole.
        let name = display::line(&call.name);
        eprintln!(
            "▸ {name} {}",
            tools::summary(&call.arguments, SUMMARY_CHARS)
        );
        let result = if !self.offered.contains(&call.name) {
            format!(
                "error: the tool `{}` is not available in this session",
                call.name
            )
        } else {
            match self
                .approvals
                .check(&self.input, &self.ctx.project, &call.name, &call.arguments)
                .await
            {
                Ok(()) => {
                    tools::run(self.ctx.clone(), call.name.clone(), call.arguments.clone()).await
                }
                Err(refused) => refused,
            }
        };
        let first = display::line(result.lines().next().unwrap_or(""));
        let more = result.lines().count().saturating_sub(1);
        if more > 0 {
            self.note(&format!("  ↳ {first} (+{more} lines)"));
        } else {
            self.note(&format!("  ↳ {first}"));
        }
        result
    }
}

/// A leg refused after tools of the task already ran (quota, budget, any refusal): the error,
/// then what ran, since files written and commands run stay done (issue 42).
fn refused_part_way(error: anyhow::Error, ran: &[String]) -> anyhow::Error {
    if ran.is_empty() {
        return error;
    }
    anyhow::anyhow!(
        "{error}\nthe task stopped part-way; its tool calls that already ran (their effects stay):\n  {}",
        ran.join("\n  ")
    )
}
