//! `relay project`, `relay claude` and `relay codex` (issue 41): the real Claude Code or Codex,
//! found on `PATH`, run against this relay for the current project with nothing else to set.
//!
//! The agent gets the relay's URL and token, the project's id (computed as `relay agent` and the
//! spec compute it, so all three see the same notes) as `x-relay-project`, and Relay's `/mcp` for
//! this session only: through environment variables and command-line overrides, never by writing
//! the user's own configuration files. Every other argument passes through unchanged, and the
//! agent's exit status is `relay`'s.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::project::Project;
use super::{credentials, server_url};

/// What the agent sends as its bearer in open mode, where the relay reads none but the agents
/// insist on a non-empty key.
const OPEN_MODE_TOKEN: &str = "relay-open-mode";
/// The variable Codex reads its key from (`env_key`, `bearer_token_env_var`).
const CODEX_TOKEN_VAR: &str = "RELAY_TOKEN";

/// `relay project`: the current directory's project id and how it was derived.
pub fn print_project() -> anyhow::Result<()> {
    use std::io::Write;
    let project = Project::detect()?;
    // Written, not printed: a reader that stops early (`relay project | head -1`) closes the
    // pipe, which is the end of the output, not a failure.
    let mut out = std::io::stdout().lock();
    let _ =
        writeln!(out, "{}", project.id()).and_then(|()| writeln!(out, "{}", project.derivation()));
    Ok(())
}

/// The relay, the token and the project an agent is launched with.
struct Target {
    server: String,
    token: String,
    project: String,
}

impl Target {
    fn detect() -> anyhow::Result<Self> {
        let server = server_url(None);
        let token = match std::env::var("RELAY_TOKEN").ok().filter(|t| !t.is_empty()) {
            Some(t) => t,
            None => credentials::Store::open()?
                .token(&server)
                .unwrap_or_else(|| OPEN_MODE_TOKEN.to_owned()),
        };
        let project = Project::detect()?.id();
        Ok(Self {
            server,
            token,
            project,
        })
    }

    fn mcp_url(&self) -> String {
        format!("{}/mcp", self.server)
    }
}

/// `relay claude [args…]`.
pub async fn claude(args: Vec<OsString>) -> anyhow::Result<i32> {
    let binary = find("claude", "@anthropic-ai/claude-code")?;
    let target = Target::detect()?;
    // The MCP server (with the token) goes in a file only the user can read, not on the command
    // line where other local users could see it; it is removed when the agent exits.
    let config = serde_json::json!({
        "mcpServers": {"relay": {
            "type": "http",
            "url": target.mcp_url(),
            "headers": {
                "Authorization": format!("Bearer {}", target.token),
                "x-relay-project": target.project,
            },
        }}
    });
    let file = PrivateFile::create("relay-mcp", &serde_json::to_vec(&config)?)?;
    let mut headers = format!("x-relay-project: {}", target.project);
    if let Some(theirs) = std::env::var("ANTHROPIC_CUSTOM_HEADERS")
        .ok()
        .filter(|h| !h.trim().is_empty())
    {
        headers = format!("{theirs}\n{headers}");
    }
    let mut command = tokio::process::Command::new(binary);
    command
        .arg("--mcp-config")
        .arg(file.path())
        .args(args)
        .env("ANTHROPIC_BASE_URL", &target.server)
        .env("ANTHROPIC_AUTH_TOKEN", &target.token)
        .env("ANTHROPIC_CUSTOM_HEADERS", headers)
        // An API key would be sent beside the token (as x-api-key) and win over it.
        .env_remove("ANTHROPIC_API_KEY");
    let status = run(command).await;
    drop(file);
    status
}

/// `relay codex [args…]`.
pub async fn codex(args: Vec<OsString>) -> anyhow::Result<i32> {
    let binary = find("codex", "@openai/codex")?;
    let target = Target::detect()?;
    let headers = format!(
        "{{ \"x-relay-project\" = {} }}",
        toml_string(&target.project)
    );
    let provider = format!(
        "model_providers.relay={{ name = \"Relay\", base_url = {}, wire_api = \"responses\", \
         env_key = \"{CODEX_TOKEN_VAR}\", http_headers = {headers} }}",
        toml_string(&format!("{}/v1", target.server))
    );
    let mcp = format!(
        "mcp_servers.relay={{ url = {}, bearer_token_env_var = \"{CODEX_TOKEN_VAR}\", \
         http_headers = {headers} }}",
        toml_string(&target.mcp_url())
    );
    let mut command = tokio::process::Command::new(binary);
    command
        .args([
            "-c",
            "model_provider=\"relay\"",
            "-c",
            &provider,
            "-c",
            &mcp,
        ])
        .args(args)
        .env(CODEX_TOKEN_VAR, &target.token);
    run(command).await
}

/// Runs the agent to its end. Ctrl-c belongs to the agent (Claude Code and Codex use it
/// themselves), so `relay` ignores it while waiting rather than dying and leaving the agent on
/// the terminal.
async fn run(mut command: tokio::process::Command) -> anyhow::Result<i32> {
    let mut child = command.spawn().context("cannot start the agent")?;
    let ignore = tokio::spawn(async { while tokio::signal::ctrl_c().await.is_ok() {} });
    let status = child.wait().await.context("waiting for the agent")?;
    ignore.abort();
    Ok(status.code().unwrap_or(1))
}

/// The agent's binary on `PATH`, or a message that says how to install it.
fn find(name: &str, package: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "`{name}` is not on PATH: install it with `npm install -g {package}`, then run this again"
            )
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A TOML basic string (what Codex's `-c` values are parsed as).
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// A file readable by the user only, in the temporary directory, deleted when dropped.
struct PrivateFile(PathBuf);

impl PrivateFile {
    fn create(prefix: &str, contents: &[u8]) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir();
        for attempt in 0u32..16 {
            let name = format!("{prefix}-{}-{attempt}-{}.json", std::process::id(), nonce());
            let path = dir.join(name);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(contents)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    return Ok(Self(path));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create {}", path.display()));
                }
            }
        }
        anyhow::bail!("cannot create a private file in {}", dir.display())
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Enough randomness that another local user cannot pre-create the name (and `create_new`
/// refuses one that exists anyway).
fn nonce() -> String {
    use sha2::{Digest, Sha256};
    let seed = format!(
        "{:?}{:?}",
        std::time::SystemTime::now(),
        std::thread::current().id()
    );
    hex::encode(Sha256::digest(seed.as_bytes()))[..16].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_strings_are_quoted_and_escaped() {
        // Whatever quoting the toml crate picks, the value reads back as it was.
        for raw in ["abc", "a\"b", "it's", "a\\b\nc"] {
            let doc: toml::Value = toml::from_str(&format!("v = {}", toml_string(raw))).unwrap();
            assert_eq!(doc["v"].as_str(), Some(raw), "{raw:?}");
        }
    }
}
