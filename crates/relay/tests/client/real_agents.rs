//! One project memory across the real agents (issue 41): `relay claude -p` and `relay codex exec`
//! run the real Claude Code and Codex CLI (from `tests/agents`) against a real relay whose model
//! is the scripted upstream. The scripted model calls Relay's MCP `remember` tool in each (Claude
//! Code's `mcp__relay__remember`; in Codex's code mode, `tools.mcp__relay__remember` from its
//! `exec` tool), the note lands in the repository's project under the agent's name, and the next
//! run of the other agent, and `relay agent -p`, have it in the system prompt Relay sends
//! upstream.
//!
//! `RELAY_AGENTS_BIN` names the agents' folder (`cd tests/agents && npm ci`); with it set, or
//! under `CI=true`, a missing agent fails the test; with neither it says SKIPPED and passes.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

const REMOTE: &str = "git@example.com:team/memory.git";
const FROM_CLAUDE: &str = "build with make; test with make check";
const FROM_CODEX: &str = "the HTTP API lives in crates/api";
/// The model Codex 0.171.0 asks for when given none; the relay serves it from the script.
const CODEX_MODEL: &str =
    "[[models]]\nname = \"gpt-6.2-sol\"\nprovider = \"fake\"\nupstream = \"scripted\"\n";

/// The agents' folder, or None (SKIPPED) when they are missing and not required.
fn agents_bin() -> Option<PathBuf> {
    let set = std::env::var_os("RELAY_AGENTS_BIN");
    let required = set.is_some() || std::env::var("CI").is_ok_and(|v| v == "true");
    let dir = set.map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/agents/node_modules/.bin")
    });
    if dir.join("claude").exists() && dir.join("codex").exists() {
        return Some(dir);
    }
    assert!(
        !required,
        "claude or codex is missing in {} (RELAY_AGENTS_BIN or CI=true require them; cd tests/agents && npm ci)",
        dir.display()
    );
    eprintln!("SKIPPED: the real agents are not installed (cd tests/agents && npm ci)");
    None
}

/// `relay <args>` to its end (the agents take seconds each): its stdout and stderr; a failure
/// fails the test.
async fn relay_run(run: &Run, args: &[&str]) -> String {
    let child = run
        .command(args)
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(240), child.wait_with_output())
        .await
        .expect("the agent did not finish in 240 s")
        .unwrap();
    let text = format!("{}\n--- stderr ---\n{}", stdout(&out), stderr(&out));
    assert!(out.status.success(), "relay {args:?} failed: {text}");
    text
}

/// The system messages of upstream request `n`, joined.
fn system(relay: &Relay, n: usize) -> String {
    relay.upstream.requests()[n]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn notes(relay: &Relay, token: &str, project: &str) -> Vec<Value> {
    let v: Value = reqwest::Client::new()
        .get(format!("{}/v1/memory/list?project_id={project}", relay.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["items"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_codex_and_relay_agent_share_one_project_memory() {
    let Some(bin) = agents_bin() else {
        return;
    };
    let relay = Relay::with_auth_and_models(vec![], CODEX_MODEL).await;
    let token = relay.signup("agents@example.com").await;
    let repo = project(Some(REMOTE));
    let id = project_id(REMOTE);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let run = Run::new(&relay, repo.path())
        .env("PATH", &path)
        .env("RELAY_TOKEN", &token)
        .env("NO_COLOR", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("ANTHROPIC_SMALL_FAST_MODEL", "scripted");
    std::fs::create_dir_all(run.home.join(".codex")).unwrap();
    let claude = |prompt: &'static str| {
        [
            "claude",
            "-p",
            prompt,
            "--model",
            "scripted",
            "--allowedTools",
            "mcp__relay__remember",
        ]
    };
    let codex = |prompt: &'static str| {
        [
            "codex",
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--color=never",
            prompt,
        ]
    };

    // Claude Code remembers through Relay's MCP server: the note is the repository's, by claude-code.
    relay.upstream.push(Reply::Tools(vec![(
        "toolu_remember",
        "mcp__relay__remember",
        json!({ "note": FROM_CLAUDE }),
    )]));
    relay.upstream.push(text("Noted for next time."));
    let out = relay_run(&run, &claude("remember how to build this")).await;
    assert!(out.contains("Noted for next time."), "{out}");
    let stored = notes(&relay, &token, &id).await;
    assert_eq!(stored.len(), 1, "{stored:?}\n{out}");
    assert_eq!(stored[0]["note"], FROM_CLAUDE);
    assert_eq!(stored[0]["author"], "claude-code");
    let last = relay.upstream.requests().len() - 1;
    let result = relay.upstream.tool_results(last);
    assert!(
        result[0].1.contains("mem#"),
        "the tool's answer: {result:?}"
    );

    // A second Claude Code run has it in the system prompt Relay sends upstream.
    relay.upstream.push(text("I know how to build it."));
    relay_run(&run, &claude("how do I build this?")).await;
    let n = relay.upstream.requests().len() - 1;
    assert!(
        system(&relay, n).contains(FROM_CLAUDE),
        "{}",
        system(&relay, n)
    );

    // Codex (its own default model, code mode) sees Claude Code's note and remembers one of its own.
    let remember = format!(
        "text(JSON.stringify(await tools.mcp__relay__remember({{note: {}}})));",
        json!(FROM_CODEX)
    );
    relay.upstream.push(Reply::RawTools(vec![(
        "call_remember",
        "functions__exec",
        json!({ "input": remember }).to_string(),
    )]));
    relay.upstream.push(text("Remembered where the API is."));
    let first = relay.upstream.requests().len();
    let out = relay_run(&run, &codex("remember where the API lives")).await;
    assert!(out.contains("Remembered where the API is."), "{out}");
    assert_eq!(
        relay.upstream.requests()[first]["model"],
        "scripted",
        "served as gpt-6.2-sol"
    );
    assert!(
        system(&relay, first).contains(FROM_CLAUDE),
        "Codex sees Claude Code's note: {}",
        system(&relay, first)
    );
    let stored = notes(&relay, &token, &id).await;
    let by_codex: Vec<&Value> = stored.iter().filter(|n| n["author"] == "codex").collect();
    assert_eq!(by_codex.len(), 1, "{stored:?}\n{out}");
    assert_eq!(by_codex[0]["note"], FROM_CODEX);

    // The reverse: Claude Code sees Codex's note.
    relay.upstream.push(text("Both notes are known."));
    relay_run(&run, &claude("where is the API?")).await;
    let n = relay.upstream.requests().len() - 1;
    assert!(
        system(&relay, n).contains(FROM_CODEX),
        "{}",
        system(&relay, n)
    );

    // And a later Codex run, and `relay agent -p` in the same repository, see both.
    relay.upstream.push(text("Codex knows both."));
    relay_run(&run, &codex("what do you know?")).await;
    let n = relay.upstream.requests().len() - 1;
    let seen = system(&relay, n);
    assert!(
        seen.contains(FROM_CLAUDE) && seen.contains(FROM_CODEX),
        "{seen}"
    );
    relay.upstream.push(text("The agent knows both."));
    let out = relay_run(&run, &["agent", "-p", "what do you know?"]).await;
    assert!(out.contains("The agent knows both."), "{out}");
    let n = relay.upstream.requests().len() - 1;
    let seen = system(&relay, n);
    assert!(
        seen.contains(FROM_CLAUDE) && seen.contains(FROM_CODEX),
        "{seen}"
    );
    assert!(out.contains("2 notes injected"), "{out}");
}
