//! Slash commands of the interactive session, run here and never sent to the model: `/help`
//! lists them, Tab completes them. A line whose first word is `/` and letters is a command (an
//! unknown one is an error); a path such as `/etc/hosts` at the start of a message is not.

use relay_wire::memory::{ListQuery, RememberRequest};

use super::agent::{Session, parse_role, role_name};
use super::display;
use super::live;

pub enum Flow {
    Continue,
    Exit,
}

pub const COMMANDS: &[(&str, &str)] = &[
    ("/help", "this list"),
    (
        "/model",
        "[name]  list the relay's models, or use one from the next message on",
    ),
    (
        "/role",
        "[worker|orchestrator|agent_orchestrator|base]  show or change the tool set",
    ),
    (
        "/memory",
        "[list | add TEXT | forget ID | search WORDS]  this project's notes",
    ),
    (
        "/clear",
        "start a new conversation (the current one stays saved)",
    ),
    (
        "/cost",
        "this session's calls, tokens, cost and what the account has left",
    ),
    (
        "/permissions",
        "[remove N]  the rules that allow calls without asking",
    ),
    ("/resume", "pick a saved conversation of this project"),
    ("/exit", "end the session (also /quit, ctrl-d)"),
    ("/quit", "end the session"),
];

/// Whether `line` is meant as a command: `/word` alone or followed by arguments.
pub fn is_command(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or("");
    first.len() > 1
        && first.starts_with('/')
        && first[1..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl Session {
    pub async fn slash(&mut self, line: &str) -> Flow {
        let (command, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match command {
            "/exit" | "/quit" => return Flow::Exit,
            "/help" => {
                eprintln!(
                    "commands (Tab completes them; a line ending in \\ continues on the next):"
                );
                for (c, what) in COMMANDS {
                    eprintln!("  {c:<13} {what}");
                }
            }
            "/model" => self.model_command(rest).await,
            "/role" => self.role_command(rest).await,
            "/memory" => self.memory(rest).await,
            "/clear" => {
                self.messages.truncate(1);
                self.saved = None;
                self.note("new conversation (the previous one is saved: /resume)");
            }
            "/cost" => self.cost().await,
            "/permissions" => self.permissions(rest),
            "/resume" => {
                if let Some(saved) = self.pick().await {
                    self.load(saved, false, false);
                    let role = self.role;
                    if let Err(e) = self.set_role(role).await {
                        eprintln!("relay: {e:#}");
                    }
                    if let Some(s) = &self.saved {
                        self.note(&format!(
                            "resumed {}: {} messages, \"{}\"",
                            s.id,
                            s.messages.len(),
                            display::line(&s.title())
                        ));
                    }
                }
            }
            other => eprintln!(
                "relay: unknown command {}; /help lists them (nothing was sent)",
                display::line(other)
            ),
        }
        Flow::Continue
    }

    async fn model_command(&mut self, name: &str) {
        let models = self.client.models().await;
        if name.is_empty() {
            match models {
                Ok(models) => {
                    let current = self.model.as_deref().unwrap_or("auto");
                    for m in models {
                        let mark = if m == current { "*" } else { " " };
                        eprintln!("{mark} {}", display::line(&m));
                    }
                }
                Err(e) => eprintln!(
                    "relay: cannot list the models: {}",
                    display::line(&e.to_string())
                ),
            }
            return;
        }
        if let Ok(models) = &models
            && !models.iter().any(|m| m == name)
        {
            eprintln!(
                "relay: the relay has no model {}; /model lists them",
                display::line(name)
            );
            return;
        }
        self.model = (name != "auto").then(|| name.to_owned());
        self.note(&format!(
            "model {} from the next message on",
            display::line(name)
        ));
    }

    async fn role_command(&mut self, name: &str) {
        if name.is_empty() {
            eprintln!(
                "tool set: {} (worker, orchestrator, agent_orchestrator or base)",
                role_name(self.role)
            );
            return;
        }
        match parse_role(name) {
            Ok(role) => match self.set_role(role).await {
                Ok(()) => self.note(&format!(
                    "tool set {}: {} tools",
                    role_name(role),
                    self.tools.len()
                )),
                Err(e) => eprintln!("relay: {e:#}"),
            },
            Err(()) => eprintln!(
                "relay: no tool set {}; worker, orchestrator, agent_orchestrator or base",
                display::line(name)
            ),
        }
    }

    async fn memory(&self, args: &str) {
        let (sub, rest) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
        let rest = rest.trim();
        let project_id = self.ctx.project.id();
        let outcome = match sub {
            "" | "list" | "search" => {
                let query = ListQuery {
                    project_id: Some(project_id),
                    limit: Some(500),
                    ..ListQuery::default()
                };
                self.client.list_notes(&query).await.map(|list| {
                    let words: Vec<String> = if sub == "search" {
                        rest.split_whitespace().map(str::to_lowercase).collect()
                    } else {
                        Vec::new()
                    };
                    let hits: Vec<_> = list
                        .items
                        .iter()
                        .filter(|n| {
                            let text = n.note.to_lowercase();
                            words.iter().all(|w| text.contains(w))
                        })
                        .collect();
                    if hits.is_empty() {
                        eprintln!(
                            "no notes{}",
                            if words.is_empty() {
                                " for this project"
                            } else {
                                " match"
                            }
                        );
                    }
                    for n in hits {
                        eprintln!("  {}  {}", display::line(&n.id), display::line(&n.note));
                    }
                })
            }
            "add" if !rest.is_empty() => {
                let request = RememberRequest {
                    note: rest.to_owned(),
                    project_id: Some(project_id),
                    project: None,
                    author: Some("user".to_owned()),
                    mem_type: None,
                };
                self.client
                    .remember(&request)
                    .await
                    .map(|()| self.note("remembered"))
            }
            "forget" if !rest.is_empty() => self.client.delete_note(rest).await.map(|d| {
                if d.deleted == 0 {
                    eprintln!("no note {}", display::line(rest));
                } else {
                    self.note("forgotten");
                }
            }),
            _ => {
                eprintln!("usage: /memory [list | add TEXT | forget ID | search WORDS]");
                Ok(())
            }
        };
        if let Err(e) = outcome {
            eprintln!("relay: {}", display::line(&e.to_string()));
        }
    }

    async fn cost(&self) {
        let t = &self.totals;
        eprintln!(
            "this session: {} calls, {} tokens in ({} cached, {}%), {} out",
            t.legs,
            t.input,
            t.cached,
            t.cached_share(),
            t.output
        );
        match live::ledger(&self.client, &t.request_ids).await {
            Some(l) => {
                let cost = l
                    .cost
                    .map_or("no price configured for these models".to_owned(), |c| {
                        format!("${c:.4}")
                    });
                eprintln!(
                    "relay's ledger: {} of {} calls recorded, {} in ({} cached), {} out, cost {cost}",
                    l.found,
                    t.request_ids.len(),
                    l.input,
                    l.cached,
                    l.output
                );
            }
            None => eprintln!("relay's ledger: not readable with this token"),
        }
        match live::left(&self.client).await {
            (None, None) => eprintln!("left: no limit on this account (or open mode)"),
            (units, tokens) => eprintln!(
                "left: {} units, {} tokens this month",
                units.map_or("unlimited".to_owned(), |u| u.to_string()),
                tokens.map_or("unlimited".to_owned(), |u| u.to_string())
            ),
        }
    }

    fn permissions(&self, args: &str) {
        if let Some(n) = args.strip_prefix("remove") {
            match n
                .trim()
                .parse::<usize>()
                .ok()
                .and_then(|n| self.approvals.remove(n))
            {
                Some(a) => self.note(&format!("removed {}", display::line(&a.rule.to_string()))),
                None => eprintln!("relay: no rule with that number; /permissions lists them"),
            }
            return;
        }
        let rules = self.approvals.list();
        if rules.is_empty() {
            eprintln!("no rules: every write, edit, command and pane is asked about");
        }
        for (i, a) in rules.iter().enumerate() {
            eprintln!(
                "  {}. {}  ({})",
                i + 1,
                display::line(&a.rule.to_string()),
                a.source
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_slash_words_and_paths_are_messages() {
        assert!(is_command("/help"));
        assert!(is_command("/model gpt"));
        assert!(is_command("/nope"));
        assert!(!is_command("/etc/hosts: what is in it?"));
        assert!(!is_command("/"));
        assert!(!is_command("hello /help"));
    }
}
