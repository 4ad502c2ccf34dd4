//! The tokens `relay login` stores: one per server in `credentials.toml` under
//! `$XDG_CONFIG_HOME/relay/` (else `~/.config/relay/`), readable by the user only (mode 0600).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use anyhow::Context;
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    servers: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub token: String,
    pub email: String,
}

/// The credentials file, loaded.
pub struct Store {
    path: PathBuf,
    file: File,
}

/// `$XDG_CONFIG_HOME/relay`, else `$HOME/.config/relay`.
fn config_dir() -> anyhow::Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("relay"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither XDG_CONFIG_HOME nor HOME is set: nowhere to keep credentials")?;
    Ok(PathBuf::from(home).join(".config").join("relay"))
}

impl Store {
    pub fn open() -> anyhow::Result<Self> {
        let path = config_dir()?.join("credentials.toml");
        let file = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .with_context(|| format!("{} is not a credentials file", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::default(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        Ok(Self { path, file })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    pub fn token(&self, server: &str) -> Option<String> {
        self.file.servers.get(server).map(|e| e.token.clone())
    }

    pub fn set(&mut self, server: &str, entry: Entry) {
        self.file.servers.insert(server.to_owned(), entry);
    }

    pub fn remove(&mut self, server: &str) -> Option<Entry> {
        self.file.servers.remove(server)
    }

    /// Writes the file through a temporary one created 0600, so the token is never readable by
    /// others, not even for a moment, and a crash leaves the old file whole.
    pub fn save(&self) -> anyhow::Result<()> {
        let dir = self
            .path
            .parent()
            .context("credentials path has no directory")?;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let text = toml::to_string(&self.file)?;
        let tmp = self.path.with_extension("toml.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&tmp, &self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(())
    }
}
