//! The interactive session: a prompt (the line editor on a terminal), slash commands, a turn,
//! the status line (under the prompt on a terminal, a line of its own elsewhere), again, until
//! ctrl-d or `/exit`. A turn that fails puts the typed message back at the prompt; every
//! conversation is saved after each answer so `-c` and `/resume` can take it up again, with the
//! very messages that were sent.

use super::agent::{Session, message, parse_role, role_name};
use super::display;
use super::editor::Read;
use super::live;
use super::sessions::Saved;
use super::slash::Flow;
use relay_wire::agent::MessageRole;

/// Which saved conversation to take up.
pub enum Resume {
    /// `-c`: the last one of this project.
    Last,
    /// `--resume [id]`: that one, or one picked from a list (empty id).
    Pick(String),
}

impl Session {
    pub async fn interact(
        &mut self,
        first: Option<String>,
        resume: Option<Resume>,
        role_given: bool,
        model_given: bool,
    ) -> anyhow::Result<()> {
        let resumed = match resume {
            Some(Resume::Last) => match self.store.as_ref().and_then(|s| s.last()) {
                Some(saved) => Some(saved),
                None => {
                    eprintln!(
                        "relay: no saved conversation in this project yet; starting a new one"
                    );
                    None
                }
            },
            Some(Resume::Pick(id)) if id.is_empty() => self.pick().await,
            Some(Resume::Pick(id)) => {
                let found = self
                    .store
                    .as_ref()
                    .and_then(|s| s.list().into_iter().find(|c| c.id == id));
                match found {
                    Some(saved) => Some(saved),
                    None => anyhow::bail!(
                        "no saved conversation {} in this project (relay agent --resume lists them)",
                        display::line(&id)
                    ),
                }
            }
            None => None,
        };
        if let Some(saved) = resumed {
            self.load(saved, role_given, model_given);
        }
        let role = self.role;
        self.set_role(role).await?;
        if let Ok(mut words) = self.input.words.lock() {
            words.commands = super::slash::COMMANDS.iter().map(|(c, _)| *c).collect();
        }
        if let Ok(models) = self.client.models().await
            && let Ok(mut words) = self.input.words.lock()
        {
            words.models = models;
        }
        eprintln!(
            "relay agent on {} in {} ({} tools; /help lists commands; ctrl-c cancels a running answer; ctrl-d quits)",
            self.server,
            self.ctx.project.root_str(),
            role_name(self.role)
        );
        if let Some(saved) = &self.saved {
            self.note(&format!(
                "resumed {}: {} messages, \"{}\"",
                saved.id,
                saved.messages.len(),
                display::line(&saved.title())
            ));
        }
        let mut next = first;
        // The message of a turn that failed, offered again at the prompt.
        let mut restore = String::new();
        loop {
            let line = match next.take() {
                Some(l) => l,
                None => {
                    let input = self.input.clone();
                    let footer = self.footer.clone();
                    let read = tokio::select! {
                        read = input.message("> ", &restore, footer.as_deref()) => read,
                        _ = tokio::signal::ctrl_c() => Read::Eof,
                    };
                    match read {
                        Read::Line(l) => l,
                        Read::Interrupted => {
                            restore.clear();
                            continue;
                        }
                        Read::Eof => return Ok(()),
                    }
                }
            };
            restore.clear();
            let text = line.trim().to_owned();
            if text.is_empty() {
                continue;
            }
            if super::slash::is_command(&text) {
                match self.slash(&text).await {
                    Flow::Exit => return Ok(()),
                    Flow::Continue => continue,
                }
            }
            let before = self.messages.len();
            self.messages.push(message(MessageRole::User, text.clone()));
            let outcome = tokio::select! {
                r = self.turn() => Some(r),
                _ = tokio::signal::ctrl_c() => None,
            };
            match outcome {
                Some(Ok(())) => {
                    self.save();
                    self.status().await;
                }
                Some(Err(e)) => {
                    eprintln!("relay: {e:#}");
                    self.messages.truncate(before);
                    self.note("(your message is back at the prompt: Enter sends it again)");
                    restore = text;
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

    /// Takes up `saved`: its messages as they were sent, its model and role unless given now.
    pub fn load(&mut self, saved: Saved, role_given: bool, model_given: bool) {
        self.messages = saved.messages.clone();
        if !model_given {
            self.model = saved.model.clone();
        }
        if !role_given && let Some(Ok(role)) = saved.role.as_deref().map(parse_role) {
            self.role = role;
        }
        self.saved = Some(saved);
    }

    /// Writes the conversation to its file; a failure is said, not fatal.
    pub fn save(&mut self) {
        let Some(store) = &self.store else { return };
        let saved = self
            .saved
            .get_or_insert_with(|| Saved::new(self.ctx.project.root_str(), Vec::new()));
        saved.messages = self.messages.clone();
        saved.model = self.model.clone();
        saved.role = Some(role_name(self.role).to_owned());
        if let Err(e) = store.save(saved) {
            eprintln!("relay: the conversation was not saved: {e:#}");
        }
    }

    /// The status line after an answer: the session's usage and what the account has left.
    /// On a terminal it becomes the line under the prompt, replacing the last one; elsewhere
    /// it is printed.
    pub async fn status(&mut self) {
        let left = live::left(&self.client).await;
        let cost = live::ledger(&self.client, &self.totals.request_ids)
            .await
            .and_then(|l| l.cost);
        let model = self
            .last_model
            .as_deref()
            .or(self.model.as_deref())
            .unwrap_or("auto");
        let line = live::status_line(model, &self.totals, cost, left);
        if self.input.is_terminal().await {
            // One row: a wrapped hint would leave the editor's idea of the screen wrong.
            let width = display::width().saturating_sub(1).max(1);
            self.footer = Some(line.chars().take(width).collect());
        } else {
            self.note(&line);
        }
    }

    /// Lists this project's conversations and asks which to take up.
    pub async fn pick(&self) -> Option<Saved> {
        let all = self.store.as_ref().map(|s| s.list()).unwrap_or_default();
        if all.is_empty() {
            eprintln!("no saved conversations in this project yet");
            return None;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        for (i, s) in all.iter().enumerate().take(20) {
            eprintln!(
                "  {}. {} · {} · {} messages · {}",
                i + 1,
                s.id,
                ago(now.saturating_sub(s.updated)),
                s.user_messages(),
                display::line(&s.title())
            );
        }
        let shown = all.len().min(20);
        loop {
            let prompt = format!("resume which? [1-{shown}, Enter to cancel] ");
            let Read::Line(answer) = self.input.answer(&prompt).await else {
                return None;
            };
            let answer = answer.trim();
            if answer.is_empty() {
                return None;
            }
            match answer.parse::<usize>() {
                Ok(n) if (1..=shown).contains(&n) => return all.into_iter().nth(n - 1),
                _ => eprintln!("answer a number from 1 to {shown}"),
            }
        }
    }
}

fn ago(secs: u64) -> String {
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        _ => format!("{} days ago", secs / 86_400),
    }
}
