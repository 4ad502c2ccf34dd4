//! `relay agent`: the round trip of spec §3 in a terminal. A leg is sent with the conversation and
//! the role's tools; text streams in; when the leg ends with `tool_calls` every call is run here,
//! in order, and answered with exactly one `tool` message by id; the next leg goes out, until
//! `done`. With `-p` one task runs to its end (answer on stdout, activity on stderr); without it the
//! session is interactive, and ctrl-c cancels the running leg, not the session.

use std::collections::HashSet;
use std::io::{IsTerminal, Write};
use std::sync::Arc;

use clap::{Args, ValueEnum};
use futures::StreamExt;
use relay_client::{AgentEvent, Client};
use relay_wire::agent::{AgentRequest, Content, Message, MessageRole, MessageToolCall, ToolCall};
use relay_wire::tools::{ToolDef, ToolRole};

use super::approval::{Approvals, Input, Policy};
use super::display;
use super::project::Project;
use super::tools::{self, Ctx};
use super::{connect, explain, server_url};

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
    /// Which tools the agent gets (spec §2.9); none is the normal set.
    #[arg(long, value_enum)]
    role: Option<Role>,
    /// A configured model name; `auto` when absent.
    #[arg(long)]
    model: Option<String>,
    /// The relay; else RELAY_URL, else http://127.0.0.1:7711.
    #[arg(long)]
    server: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Role {
    #[value(name = "worker")]
    Worker,
    #[value(name = "orchestrator")]
    Orchestrator,
    #[value(name = "agent_orchestrator")]
    AgentOrchestrator,
}

impl From<Role> for ToolRole {
    fn from(r: Role) -> Self {
        match r {
            Role::Worker => Self::Worker,
            Role::Orchestrator => Self::Orchestrator,
            Role::AgentOrchestrator => Self::AgentOrchestrator,
        }
    }
}

struct Session {
    server: String,
    client: Client,
    ctx: Arc<Ctx>,
    approvals: Approvals,
    input: Arc<Input>,
    tools: Vec<ToolDef>,
    offered: HashSet<String>,
    role: Option<ToolRole>,
    model: Option<String>,
    messages: Vec<Message>,
    /// Interactive: text streams to stdout as it comes. Print mode: the final answer only.
    interactive: bool,
    dim: bool,
}

fn message(role: MessageRole, text: String) -> Message {
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
    let role = args.role.map(ToolRole::from);
    let tools = client.tools(role).await.map_err(|e| explain(&server, e))?;
    let interactive = args.prompt.is_none();
    let policy = if args.yes {
        Policy::Yes
    } else if interactive || std::io::stdin().is_terminal() {
        Policy::Ask
    } else {
        Policy::Refuse
    };
    let system = format!(
        "You are relay's coding agent, working in the project at {} (current directory {}). \
         Use the tools to look at and change the project; paths are relative to the project root.",
        project.root_str(),
        project.cwd_str()
    );
    let mut session = Session {
        ctx: Arc::new(Ctx {
            project,
            client: client.clone(),
            server: server.clone(),
        }),
        server,
        client,
        approvals: Approvals::new(policy),
        input: Arc::new(Input::stdin()),
        offered: tools.iter().map(|t| t.name.clone()).collect(),
        tools,
        role,
        model: args.model,
        messages: vec![message(MessageRole::System, system)],
        interactive,
        dim: std::io::stderr().is_terminal(),
    };
    match args.prompt {
        Some(prompt) => {
            let prompt = match args.task {
                Some(extra) => format!("{prompt} {extra}"),
                None => prompt,
            };
            session.messages.push(message(MessageRole::User, prompt));
            session.turn().await
        }
        None => session.interact(args.task).await,
    }
}

impl Session {
    fn note(&self, text: &str) {
        if self.dim {
            eprintln!("\x1b[2m{text}\x1b[0m");
        } else {
            eprintln!("{text}");
        }
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

    /// Legs until `done`; the conversation grows by the assistant's messages and the tool results.
    async fn turn(&mut self) -> anyhow::Result<()> {
        for _ in 0..MAX_LEGS {
            let mut stream = self
                .client
                .leg(&self.request())
                .await
                .map_err(|e| explain(&self.server, e))?;
            let mut text = String::new();
            let mut calls: Option<Vec<ToolCall>> = None;
            // Reasoning is printed without line ends as it streams; the answer starts on a line of its own.
            let mut thinking = false;
            while let Some(event) = stream.next().await {
                let event = event.map_err(|e| explain(&self.server, e))?;
                if thinking && !matches!(event, AgentEvent::Reasoning { .. } | AgentEvent::Ping) {
                    eprintln!();
                    thinking = false;
                }
                match event {
                    AgentEvent::Start {
                        model,
                        project_id,
                        notes,
                        ..
                    } => self.note(&format!(
                        "[relay] model {}, project {}, {notes} notes injected",
                        display::line(&model),
                        display::line(project_id.as_deref().unwrap_or("none"))
                    )),
                    AgentEvent::Text { text: piece } => {
                        if self.interactive {
                            print!("{}", display::text(&piece));
                            let _ = std::io::stdout().flush();
                        }
                        text.push_str(&piece);
                    }
                    AgentEvent::Reasoning { text, .. } => {
                        self.reasoning(&text);
                        thinking = true;
                    }
                    AgentEvent::ToolCalls { calls: c, .. } => calls = Some(c),
                    AgentEvent::Done { .. } => {}
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
        if self.dim {
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
        let args = tools::describe(&call.arguments);
        let result = if !self.offered.contains(&call.name) {
            format!(
                "error: the tool `{}` is not available in this session",
                call.name
            )
        } else {
            match self.approvals.check(&self.input, &call.name, &args).await {
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

    /// The interactive session: a prompt, a turn, again, until end of input or ctrl-c at the prompt.
    async fn interact(&mut self, first: Option<String>) -> anyhow::Result<()> {
        eprintln!(
            "relay agent on {} in {} (ctrl-c cancels a running answer; ctrl-d quits)",
            self.server,
            self.ctx.project.root_str()
        );
        let mut next = first;
        loop {
            let line = match next.take() {
                Some(l) => l,
                None => {
                    eprint!("> ");
                    let _ = std::io::stderr().flush();
                    let input = self.input.clone();
                    tokio::select! {
                        line = input.line() => match line {
                            Some(l) => l,
                            None => return Ok(()),
                        },
                        _ = tokio::signal::ctrl_c() => return Ok(()),
                    }
                }
            };
            let line = line.trim().to_owned();
            if line.is_empty() {
                continue;
            }
            if line == "/exit" || line == "/quit" {
                return Ok(());
            }
            let before = self.messages.len();
            self.messages.push(message(MessageRole::User, line));
            let outcome = tokio::select! {
                r = self.turn() => Some(r),
                _ = tokio::signal::ctrl_c() => None,
            };
            match outcome {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    eprintln!("relay: {e:#}");
                    self.messages.truncate(before);
                }
                None => {
                    // Dropping the leg closed its stream; the relay cancels the upstream call.
                    println!();
                    eprintln!("[cancelled]");
                    self.messages.truncate(before);
                }
            }
        }
    }
}
