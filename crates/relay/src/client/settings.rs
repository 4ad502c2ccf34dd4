//! The project's `.relay/settings.toml`: allow rules a team keeps with the code, e.g.
//!
//! ```toml
//! [permissions]
//! allow = ["Bash(cargo test:*)", "Write(CHANGELOG.md)"]
//! ```
//!
//! A checkout can hold anything, so its rules apply only once the user accepted them: the first
//! interactive session asks, and the acceptance is kept (as a hash of the rules) under the user's
//! data folder; a changed file is asked about again. Until then the rules are ignored, and a run
//! that cannot ask says so.

use anyhow::Context;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::display;
use super::editor::{Input, Read};
use super::project::Project;
use super::rules::Rule;
use super::sessions::{data_dir, private_dir, write_private};

#[derive(Deserialize, Default)]
struct File {
    #[serde(default)]
    permissions: Permissions,
}

#[derive(Deserialize, Default)]
struct Permissions {
    #[serde(default)]
    allow: Vec<String>,
}

pub const SOURCE: &str = ".relay/settings.toml";

/// The rules of the project's settings file the user has accepted (asking through `input` when
/// there is one and they are new); empty when there is no file.
pub async fn allowed(project: &Project, input: Option<&Input>) -> anyhow::Result<Vec<Rule>> {
    let path = project.root.join(".relay/settings.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let file: File = toml::from_str(&text)
        .with_context(|| format!("{} is not a settings file", path.display()))?;
    let mut rules = Vec::new();
    for r in &file.permissions.allow {
        match Rule::parse(r) {
            Some(rule) => rules.push(rule),
            None => eprintln!(
                "relay: {SOURCE}: `{}` is not a rule (Bash(cmd:*), Write(path), Tool(name)); ignored",
                display::line(r)
            ),
        }
    }
    if rules.is_empty() {
        return Ok(rules);
    }
    let digest = fingerprint(project, &rules);
    let marker = data_dir()?.join("accepted-settings").join(project.id());
    if std::fs::read_to_string(&marker).is_ok_and(|d| d.trim() == digest) {
        return Ok(rules);
    }
    let Some(input) = input else {
        eprintln!(
            "relay: {SOURCE} holds {} allow rules not accepted yet; they are ignored until an \
             interactive `relay agent` accepts them",
            rules.len()
        );
        return Ok(Vec::new());
    };
    eprintln!("{SOURCE} in this project allows, without asking:");
    for r in &rules {
        eprintln!("  {}", display::line(&r.to_string()));
    }
    loop {
        match input
            .answer("accept these rules for this project? [y/n] ")
            .await
        {
            Read::Line(a) if matches!(a.trim(), "y" | "yes") => break,
            Read::Line(a) if !matches!(a.trim(), "n" | "no") => eprintln!("answer y or n"),
            _ => {
                eprintln!("not accepted: every such call will be asked about");
                return Ok(Vec::new());
            }
        }
    }
    if let Some(dir) = marker.parent() {
        private_dir(dir)?;
    }
    write_private(&marker, digest.as_bytes())?;
    Ok(rules)
}

/// Which rules, for which project: a changed file or another checkout is asked about again.
fn fingerprint(project: &Project, rules: &[Rule]) -> String {
    let mut h = Sha256::new();
    h.update(project.root_str().as_bytes());
    for r in rules {
        h.update(b"\n");
        h.update(r.to_string().as_bytes());
    }
    hex::encode(h.finalize())
}
