//! `relay project`, `relay claude` and `relay codex` (issue 41) with a fake agent on PATH
//! (`fake_agent.py`) that records what it was launched with and, like the real one, uses the MCP
//! server it was handed to remember a note, which must land in the repository's project under the
//! agent's name.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::support::{Relay, Run, project, project_id, stderr, stdout};

const REMOTE: &str = "git@example.com:team/app.git";

/// A folder holding the fake agent as `claude` and `codex`.
fn fake_bin() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/client/fake_agent.py");
    for name in ["claude", "codex"] {
        std::os::unix::fs::symlink(&script, dir.path().join(name)).unwrap();
    }
    dir
}

/// `bin` first on PATH, then the system's (for python3 and git).
fn path_with(bin: &Path) -> String {
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

async fn notes(relay: &Relay, token: Option<&str>, project: &str) -> Vec<Value> {
    let mut r =
        reqwest::Client::new().get(format!("{}/v1/memory/list?project_id={project}", relay.url));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let v: Value = r.send().await.unwrap().json().await.unwrap();
    v["items"].as_array().unwrap().clone()
}

fn read_record(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn relay_project_prints_the_id_relay_agent_uses() {
    let relay = Relay::open(vec![]).await;
    let repo = project(Some(REMOTE));
    let out = Run::new(&relay, repo.path()).run(&["project"], "").await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), project_id(REMOTE));
    assert!(lines.next().unwrap().contains(REMOTE), "{text}");

    let plain = project(None);
    let out = Run::new(&relay, plain.path()).run(&["project"], "").await;
    let root = plain.path().canonicalize().unwrap().display().to_string();
    assert_eq!(stdout(&out).lines().next().unwrap(), project_id(&root));
    assert!(stdout(&out).contains("not in a git repository"));
}

#[tokio::test]
async fn relay_claude_runs_claude_code_for_this_project_with_the_notes_tools() {
    let relay = Relay::with_auth(vec![], "").await;
    let token = relay.signup("dev@example.com").await;
    let repo = project(Some(REMOTE));
    let bin = fake_bin();
    let record = relay.dir.path().join("claude.json");
    let run = Run::new(&relay, repo.path())
        .env("PATH", &path_with(bin.path()))
        .env("RELAY_TOKEN", &token)
        .env("FAKE_RECORD", record.to_str().unwrap())
        .env("FAKE_NOTE", "build with make; test with make check")
        .env("FAKE_EXIT", "7")
        .env("ANTHROPIC_API_KEY", "sk-ant-should-not-reach-claude");
    let out = run
        .run(
            &["claude", "-p", "fix the bug", "--model", "opus", "--help"],
            "",
        )
        .await;
    // The agent's exit status is relay's.
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    let seen = read_record(&record);
    let id = project_id(REMOTE);
    let argv: Vec<&str> = seen["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv[0], "--mcp-config");
    assert_eq!(
        &argv[2..],
        ["-p", "fix the bug", "--model", "opus", "--help"]
    );
    let env = &seen["env"];
    assert_eq!(env["ANTHROPIC_BASE_URL"], relay.url.as_str());
    assert_eq!(env["ANTHROPIC_AUTH_TOKEN"], token.as_str());
    assert_eq!(
        env["ANTHROPIC_CUSTOM_HEADERS"],
        format!("x-relay-project: {id}").as_str()
    );
    assert!(env["ANTHROPIC_API_KEY"].is_null());
    // The MCP server was the relay's /mcp, in a file only the user could read, gone afterwards.
    let server = &seen["mcp_config"]["mcpServers"]["relay"];
    assert_eq!(server["type"], "http");
    assert_eq!(server["url"], format!("{}/mcp", relay.url).as_str());
    assert_eq!(server["headers"]["x-relay-project"], id.as_str());
    assert_eq!(seen["mcp_config_mode"], "0o600");
    assert!(!Path::new(seen["mcp_config_path"].as_str().unwrap()).exists());
    assert!(
        !argv.iter().any(|a| a.contains(&token)),
        "no token on the command line"
    );
    // Through it, the note landed in the repository's project, written by claude-code.
    let stored = notes(&relay, Some(&token), &id).await;
    assert_eq!(stored.len(), 1, "{}", seen["remember"]);
    assert_eq!(stored[0]["note"], "build with make; test with make check");
    assert_eq!(stored[0]["author"], "claude-code");
}

#[tokio::test]
async fn relay_codex_runs_codex_for_this_project_with_the_notes_tools() {
    let relay = Relay::open(vec![]).await;
    let repo = project(Some(REMOTE));
    let bin = fake_bin();
    let record = relay.dir.path().join("codex.json");
    let run = Run::new(&relay, repo.path())
        .env("PATH", &path_with(bin.path()))
        .env("FAKE_RECORD", record.to_str().unwrap())
        .env("FAKE_NOTE", "the API lives in crates/api");
    let out = run.run(&["codex", "exec", "--json", "do it"], "").await;
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = read_record(&record);
    let id = project_id(REMOTE);
    let argv: Vec<&str> = seen["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(&argv[argv.len() - 3..], ["exec", "--json", "do it"]);
    let o = &seen["overrides"];
    assert_eq!(o["model_provider"], "relay");
    let provider = &o["model_providers.relay"];
    assert_eq!(provider["base_url"], format!("{}/v1", relay.url).as_str());
    assert_eq!(provider["wire_api"], "responses");
    assert_eq!(provider["env_key"], "RELAY_TOKEN");
    assert_eq!(provider["http_headers"]["x-relay-project"], id.as_str());
    assert!(
        o.get("model").is_none(),
        "Codex keeps its own default model"
    );
    let mcp = &o["mcp_servers.relay"];
    assert_eq!(mcp["url"], format!("{}/mcp", relay.url).as_str());
    assert_eq!(mcp["http_headers"]["x-relay-project"], id.as_str());
    // Open mode: a placeholder key that Codex insists on and the relay ignores.
    assert!(!seen["env"]["RELAY_TOKEN"].as_str().unwrap().is_empty());
    let stored = notes(&relay, None, &id).await;
    assert_eq!(stored.len(), 1, "{}", seen["remember"]);
    assert_eq!(stored[0]["author"], "codex");
}

#[tokio::test]
async fn a_missing_agent_names_its_npm_package() {
    let relay = Relay::open(vec![]).await;
    let repo = project(None);
    let empty = tempfile::tempdir().unwrap();
    for (agent, package) in [
        ("claude", "@anthropic-ai/claude-code"),
        ("codex", "@openai/codex"),
    ] {
        let out = Run::new(&relay, repo.path())
            .env("PATH", empty.path().to_str().unwrap())
            .run(&[agent, "-p", "x"], "")
            .await;
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains(package), "{err}");
        assert!(err.contains("PATH"), "{err}");
    }
}
