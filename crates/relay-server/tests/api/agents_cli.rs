//! The real coding agents through Relay in auth mode: Codex CLI (`codex exec`, Responses API)
//! over an `openai` and an `anthropic` provider, and Claude Code (`claude -p`), each running a
//! shell tool round trip against a scripted fake provider. The binaries come from
//! `tests/agents` (`npm ci`); `RELAY_AGENTS_BIN` names their folder. With it unset and the
//! binaries missing the tests say SKIPPED and pass; with it set, or under CI (`CI=true`), a
//! missing binary fails.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use relay_server::config::{ProviderConfig, ProviderKind};
use serde_json::{Value, json};

use crate::agent::with_fake;
use crate::fake_upstream::{self as up, FakeUpstream};
use crate::helpers::{TestApp, auth_config};

/// The agent binary, or None (SKIPPED) when it is missing and not required: `RELAY_AGENTS_BIN`
/// set or `CI=true` requires it.
pub(crate) fn agent_bin(name: &str) -> Option<PathBuf> {
    let set = std::env::var_os("RELAY_AGENTS_BIN");
    let required = set.is_some() || std::env::var("CI").is_ok_and(|v| v == "true");
    let dir = set.map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/agents/node_modules/.bin")
    });
    let bin = dir.join(name);
    if bin.exists() {
        return Some(bin);
    }
    assert!(
        !required,
        "{} is missing (RELAY_AGENTS_BIN or CI=true require it; cd tests/agents && npm ci)",
        bin.display()
    );
    eprintln!(
        "SKIPPED: {} is not installed (cd tests/agents && npm ci)",
        bin.display()
    );
    None
}

/// A scripted Anthropic Messages upstream: answers each `/v1/messages` with the next queued SSE
/// body (else a short text answer) and records the request bodies.
pub(crate) struct FakeAnthropic {
    pub(crate) base_url: String,
    script: Arc<Mutex<VecDeque<String>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

pub(crate) fn anthropic_sse(blocks: &[Value], stop_reason: &str) -> String {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "model": "claude-x", "content": [], "stop_reason": null,
        "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    for (i, b) in blocks.iter().enumerate() {
        if b["type"] == "text" {
            out += &event(
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
            );
            out += &event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}),
            );
        } else {
            out += &event(
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}),
            );
            out += &event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": b["input"].to_string()}}),
            );
        }
        out += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    out += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 5}}),
    );
    out + &event("message_stop", json!({"type": "message_stop"}))
}

impl FakeAnthropic {
    pub(crate) async fn start() -> Self {
        let script: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (s, r) = (script.clone(), requests.clone());
        let app = axum::Router::new().route(
            "/v1/messages",
            axum::routing::post(move |body: Bytes| {
                let (s, r) = (s.clone(), r.clone());
                async move {
                    r.lock()
                        .unwrap()
                        .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                    let reply = s.lock().unwrap().pop_front().unwrap_or_else(|| {
                        anthropic_sse(&[json!({"type": "text", "text": "ok"})], "end_turn")
                    });
                    axum::response::Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(axum::body::Body::from(reply))
                        .unwrap()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            base_url: format!("http://{addr}"),
            script,
            requests,
        }
    }

    pub(crate) fn push(&self, sse: String) {
        self.script.lock().unwrap().push_back(sse);
    }

    pub(crate) fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// A relay in auth mode whose models m1/m2 are the OpenAI fake, or with `anthropic` set, whose
/// provider `fake` is the Anthropic one.
async fn relay(fake: &FakeUpstream, anthropic: Option<&FakeAnthropic>) -> TestApp {
    let anthropic = anthropic.map(|a| a.base_url.clone());
    TestApp::spawn_with(|dir| {
        let mut c = with_fake(auth_config(dir), fake);
        if let Some(url) = anthropic {
            c.providers = vec![ProviderConfig {
                base_url: Some(url),
                ..ProviderConfig::new("fake", ProviderKind::Anthropic)
            }];
        }
        c.auth.as_mut().unwrap().default_limit = 100;
        c.limits.agent_burst = 1_000;
        c
    })
    .await
}

/// Runs `bin args` in `cwd` with `envs`; panics with its output unless it exits 0.
pub(crate) async fn run(
    bin: &PathBuf,
    args: &[&str],
    cwd: &std::path::Path,
    envs: &[(&str, String)],
) -> String {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args)
        .current_dir(cwd)
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(240), cmd.output())
        .await
        .expect("the agent did not finish in 240 s")
        .unwrap();
    let text = format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{bin:?} {args:?} failed: {text}");
    text
}

/// Codex's home with Relay as its model provider, and the environment it runs in.
fn codex_home(app: &TestApp, token: &str, home: &std::path::Path) -> Vec<(&'static str, String)> {
    let config = format!(
        "model = \"m1\"\nmodel_provider = \"relay\"\n\n[model_providers.relay]\nname = \"Relay\"\n\
         base_url = \"{}\"\nenv_key = \"RELAY_TOKEN\"\nwire_api = \"responses\"\n\
         http_headers = {{ \"x-relay-project\" = \"codex-test\" }}\n",
        app.url("/v1")
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    vec![
        ("CODEX_HOME", home.display().to_string()),
        ("HOME", home.display().to_string()),
        ("RELAY_TOKEN", token.to_owned()),
        ("NO_COLOR", "1".into()),
    ]
}

pub(crate) const CODEX_FLAGS: [&str; 4] = [
    "exec",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
    "--color=never",
];

/// The shell tool Codex offers in its first request, as (name, arguments that run `command`).
fn shell_call(first: &Value, command: &str) -> (String, String) {
    let names: Vec<&str> = first["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().or(t["name"].as_str()))
        .collect();
    for (name, args) in [
        ("exec_command", json!({"cmd": command})),
        ("shell_command", json!({"command": command})),
        ("shell", json!({"command": ["bash", "-lc", command]})),
    ] {
        if names.contains(&name) {
            return (name.to_owned(), args.to_string());
        }
    }
    panic!("no shell tool among {names:?}");
}

#[tokio::test]
async fn codex_exec_runs_a_shell_tool_round_trip_over_an_openai_provider() {
    let Some(codex) = agent_bin("codex") else {
        return;
    };
    let fake = FakeUpstream::start().await;
    let app = relay(&fake, None).await;
    let token = app.user("codex@example.com").await;
    app.remember(Some(&token), "codex-test", "Relay-note: prefer ripgrep.")
        .await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let envs = codex_home(&app, &token, home.path());
    // A first run answered "ok" shows which shell tool this Codex offers.
    run(
        &codex,
        &[&CODEX_FLAGS[..], &["say ok"]].concat(),
        work.path(),
        &envs,
    )
    .await;
    let first = fake.requests()[0].clone();
    // config.toml's `http_headers` name the project: its note is in a system message of its
    // own, after Codex's instructions.
    assert!(
        first["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "system")
            .any(|m| m["content"]
                .as_str()
                .is_some_and(|c| c.contains("Relay-note: prefer ripgrep.")))
    );
    let (name, args) = shell_call(&first, "echo relay-$((40+2)) > proof.txt");
    fake.push("up-1", up::tool_call_reply("call_sh1", &name, &args));
    fake.push("up-1", up::text_reply(&["The file is written."]));
    let out = run(
        &codex,
        &[&CODEX_FLAGS[..], &["write the proof file"]].concat(),
        work.path(),
        &envs,
    )
    .await;
    assert!(out.contains("The file is written."), "{out}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("proof.txt"))
            .unwrap()
            .trim(),
        "relay-42"
    );
    let requests = fake.requests();
    let after = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let result = after
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result went upstream");
    assert_eq!(result["tool_call_id"], "call_sh1");
    // A second turn of the same session carries the first turn's conversation.
    let out = run(
        &codex,
        &[&CODEX_FLAGS[..], &["resume", "--last", "and now?"]].concat(),
        work.path(),
        &envs,
    )
    .await;
    assert!(out.contains("ok"), "{out}");
    let last = fake.requests().last().unwrap().clone();
    let text = last["messages"].to_string();
    assert!(
        text.contains("write the proof file") && text.contains("and now?"),
        "{text}"
    );
}

#[tokio::test]
async fn codex_exec_runs_a_shell_tool_round_trip_over_an_anthropic_provider() {
    let Some(codex) = agent_bin("codex") else {
        return;
    };
    let fake = FakeUpstream::start().await;
    let anthropic = FakeAnthropic::start().await;
    let app = relay(&fake, Some(&anthropic)).await;
    let token = app.user("codex@example.com").await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let envs = codex_home(&app, &token, home.path());
    run(
        &codex,
        &[&CODEX_FLAGS[..], &["say ok"]].concat(),
        work.path(),
        &envs,
    )
    .await;
    let first = anthropic.requests()[0].clone();
    let names: Vec<Value> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!({"function": {"name": t["name"]}}))
        .collect();
    let (name, args) = shell_call(
        &json!({"tools": names}),
        "echo claude-$((40+2)) > proof.txt",
    );
    let input: Value = serde_json::from_str(&args).unwrap();
    anthropic.push(anthropic_sse(
        &[json!({"type": "tool_use", "id": "toolu_1", "name": name, "input": input})],
        "tool_use",
    ));
    anthropic.push(anthropic_sse(
        &[json!({"type": "text", "text": "Written via Claude."})],
        "end_turn",
    ));
    let out = run(
        &codex,
        &[&CODEX_FLAGS[..], &["write the proof file"]].concat(),
        work.path(),
        &envs,
    )
    .await;
    assert!(out.contains("Written via Claude."), "{out}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("proof.txt"))
            .unwrap()
            .trim(),
        "claude-42"
    );
    let last = anthropic.requests().last().unwrap().to_string();
    assert!(
        last.contains("tool_result") && last.contains("toolu_1"),
        "{last}"
    );
}

#[tokio::test]
async fn claude_code_runs_a_bash_tool_round_trip() {
    let Some(claude) = agent_bin("claude") else {
        return;
    };
    let fake = FakeUpstream::start().await;
    let anthropic = FakeAnthropic::start().await;
    let app = relay(&fake, Some(&anthropic)).await;
    let token = app.user("claude@example.com").await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    anthropic.push(anthropic_sse(
        &[json!({"type": "tool_use", "id": "toolu_cc", "name": "Bash",
        "input": {"command": "echo cc-$((40+2)) > proof.txt", "description": "write proof"}})],
        "tool_use",
    ));
    anthropic.push(anthropic_sse(
        &[json!({"type": "text", "text": "Claude wrote it."})],
        "end_turn",
    ));
    let envs = vec![
        ("HOME", home.path().display().to_string()),
        ("ANTHROPIC_BASE_URL", app.url("")),
        ("ANTHROPIC_API_KEY", token.clone()),
        ("ANTHROPIC_MODEL", "m1".into()),
        ("ANTHROPIC_SMALL_FAST_MODEL", "m1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
    ];
    let out = run(
        &claude,
        &[
            "-p",
            "write the proof file",
            "--allowedTools",
            "Bash",
            "--model",
            "m1",
        ],
        work.path(),
        &envs,
    )
    .await;
    assert!(out.contains("Claude wrote it."), "{out}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("proof.txt"))
            .unwrap()
            .trim(),
        "cc-42"
    );
    let results = anthropic
        .requests()
        .iter()
        .filter(|r| r.to_string().contains("toolu_cc"))
        .count();
    assert!(results >= 1, "the tool result went upstream");
}
