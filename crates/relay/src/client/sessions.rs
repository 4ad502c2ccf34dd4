//! Conversations kept on disk so `relay agent -c` continues the last one of a project and
//! `--resume` or `/resume` picks one. One JSON file per conversation under
//! `$XDG_DATA_HOME/relay/sessions/<project id>/` (else `~/.local/share/relay/…`), readable by the
//! user only (files 0600, folders 0700): they hold everything the model read and wrote. The
//! messages are stored exactly as they were sent, the system message included, so a resumed
//! conversation sends the same prefix and the provider's prompt cache still applies.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use relay_wire::agent::{Content, Message, MessageRole};
use serde::{Deserialize, Serialize};

/// `$XDG_DATA_HOME/relay`, else `$HOME/.local/share/relay`.
pub fn data_dir() -> anyhow::Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("relay"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither XDG_DATA_HOME nor HOME is set: nowhere to keep sessions and history")?;
    Ok(PathBuf::from(home).join(".local/share/relay"))
}

/// A folder only the user can enter, created with its parents.
pub fn private_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

/// Writes `bytes` to `path` through a temporary file renamed over it, mode 0600.
pub fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saved {
    pub id: String,
    pub root: String,
    pub created: u64,
    pub updated: u64,
    #[serde(default)]
    pub model: Option<String>,
    /// `worker`, `orchestrator`, `agent_orchestrator`, or none.
    #[serde(default)]
    pub role: Option<String>,
    pub messages: Vec<Message>,
}

impl Saved {
    pub fn new(root: String, messages: Vec<Message>) -> Self {
        let created = now();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Self {
            id: format!(
                "{created}-{:05}{:03}",
                std::process::id() % 100_000,
                nanos % 1000
            ),
            root,
            created,
            updated: created,
            model: None,
            role: None,
            messages,
        }
    }

    /// The first user message, on one line and cut, to recognise the conversation by.
    pub fn title(&self) -> String {
        let first = self
            .messages
            .iter()
            .find(|m| m.role == MessageRole::User)
            .and_then(|m| match &m.content {
                Some(Content::Text(t)) => Some(t.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "(no message yet)".to_owned());
        let one: String = first.split_whitespace().collect::<Vec<_>>().join(" ");
        if one.chars().count() > 60 {
            format!("{}…", one.chars().take(60).collect::<String>())
        } else {
            one
        }
    }

    pub fn user_messages(&self) -> usize {
        self.messages
            .iter()
            .filter(|m| m.role == MessageRole::User)
            .count()
    }
}

/// The conversations of one project.
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn for_project(project_id: &str) -> anyhow::Result<Self> {
        Ok(Self {
            dir: data_dir()?.join("sessions").join(project_id),
        })
    }

    /// Saves `s` (a conversation with no user message yet is not worth a file).
    pub fn save(&self, s: &mut Saved) -> anyhow::Result<()> {
        if s.user_messages() == 0 {
            return Ok(());
        }
        private_dir(&self.dir)?;
        s.updated = now();
        let bytes = serde_json::to_vec(s)?;
        write_private(&self.dir.join(format!("{}.json", s.id)), &bytes)
    }

    /// Every readable conversation, the most recently updated first.
    pub fn list(&self) -> Vec<Saved> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut all: Vec<Saved> = entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect();
        all.sort_by(|a: &Saved, b: &Saved| b.updated.cmp(&a.updated).then(b.id.cmp(&a.id)));
        all
    }

    pub fn last(&self) -> Option<Saved> {
        self.list().into_iter().next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn saved_files_are_private_and_come_back_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store {
            dir: dir.path().join("p"),
        };
        let user = |t: &str| Message {
            role: MessageRole::User,
            content: Some(Content::Text(t.into())),
            tool_calls: None,
            tool_call_id: None,
        };
        let mut empty = Saved::new("/r".into(), vec![]);
        store.save(&mut empty).unwrap();
        assert!(store.list().is_empty(), "no file without a user message");
        let mut a = Saved::new("/r".into(), vec![user("first one")]);
        store.save(&mut a).unwrap();
        let mut b = Saved::new("/r".into(), vec![user("second one")]);
        b.id.push('b');
        store.save(&mut b).unwrap();
        b.updated += 10;
        let bytes = serde_json::to_vec(&b).unwrap();
        write_private(&store.dir.join(format!("{}.json", b.id)), &bytes).unwrap();
        let list = store.list();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].title(), "second one");
        let mode = std::fs::metadata(store.dir.join(format!("{}.json", a.id)))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dmode = std::fs::metadata(&store.dir).unwrap().permissions().mode();
        assert_eq!(dmode & 0o777, 0o700);
    }
}
