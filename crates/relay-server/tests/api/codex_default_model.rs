//! Codex as it comes (issue 41): with no `model` in its configuration Codex 0.171.0 asks for its
//! own default model, `gpt-6.2-sol`, and with it sends its tools in an `additional_tools` input
//! item (a `functions` namespace whose custom `exec` tool runs JavaScript that calls the nested
//! tools, `tools.exec_command` among them). A relay that serves that name through `[[models]]`
//! completes a shell task with it over a Chat Completions provider and over an Anthropic one:
//! the scripted model calls the flattened `functions__exec`, Codex runs the command, and the
//! result goes back upstream.
//!
//! The binary comes from `tests/agents` (`RELAY_AGENTS_BIN`; see `agents_cli.rs` for when a
//! missing one fails).

use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
use serde_json::{Value, json};

use crate::agent::with_fake;
use crate::agents_cli::{CODEX_FLAGS, FakeAnthropic, agent_bin, anthropic_sse, run};
use crate::fake_upstream::{self as up, FakeUpstream};
use crate::helpers::{TestApp, auth_config};

/// The model Codex 0.171.0 uses when its configuration names none.
const CODEX_DEFAULT: &str = "gpt-6.2-sol";

/// Code-mode JavaScript that runs `command` through Codex's own shell tool.
fn exec_input(command: &str) -> String {
    format!(
        "const r = await tools.exec_command({{cmd: {}}}); text(JSON.stringify(r));",
        json!(command)
    )
}

/// A relay in auth mode serving `gpt-6.2-sol` from the OpenAI fake (upstream `up-1`), or with
/// `anthropic`, from the Anthropic one.
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
        c.models.push(ModelConfig {
            name: CODEX_DEFAULT.into(),
            provider: "fake".into(),
            upstream: "up-1".into(),
            ..Default::default()
        });
        c.auth.as_mut().unwrap().default_limit = 100;
        c.limits.agent_burst = 1_000;
        c
    })
    .await
}

/// Codex's home with Relay as its provider and no `model`, and the environment it runs in.
fn codex_home(app: &TestApp, token: &str, home: &std::path::Path) -> Vec<(&'static str, String)> {
    let config = format!(
        "model_provider = \"relay\"\n\n[model_providers.relay]\nname = \"Relay\"\n\
         base_url = \"{}\"\nenv_key = \"RELAY_TOKEN\"\nwire_api = \"responses\"\n",
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

/// The names of the tools a Chat Completions request offered.
fn chat_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn codex_with_its_default_model_completes_a_task_over_a_chat_provider() {
    let Some(codex) = agent_bin("codex") else {
        return;
    };
    let fake = FakeUpstream::start().await;
    let app = relay(&fake, None).await;
    let token = app.user("sol@example.com").await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let envs = codex_home(&app, &token, home.path());
    let args = json!({"input": exec_input("echo sol-$((40+2)) > proof.txt")}).to_string();
    fake.push(
        "up-1",
        up::tool_call_reply("call_sol", "functions__exec", &args),
    );
    fake.push("up-1", up::text_reply(&["Done with the default model."]));
    let out = run(
        &codex,
        &[&CODEX_FLAGS[..], &["write the proof file"]].concat(),
        work.path(),
        &envs,
    )
    .await;
    assert!(out.contains("Done with the default model."), "{out}");
    assert!(
        out.contains(CODEX_DEFAULT),
        "Codex ran its own model: {out}"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("proof.txt"))
            .unwrap()
            .trim(),
        "sol-42"
    );
    let requests = fake.requests();
    // The additional_tools item reached the provider as functions, namespaces flattened.
    assert!(
        chat_tools(&requests[0]).contains(&"functions__exec".to_owned()),
        "{:?}",
        chat_tools(&requests[0])
    );
    let result = requests
        .last()
        .unwrap()
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.iter().find(|m| m["role"] == "tool").cloned())
        .expect("the tool result went upstream");
    assert_eq!(result["tool_call_id"], "call_sol");
    assert!(
        result["content"].to_string().contains("exit_code"),
        "{result}"
    );
}

#[tokio::test]
async fn codex_with_its_default_model_completes_a_task_over_an_anthropic_provider() {
    let Some(codex) = agent_bin("codex") else {
        return;
    };
    let fake = FakeUpstream::start().await;
    let anthropic = FakeAnthropic::start().await;
    let app = relay(&fake, Some(&anthropic)).await;
    let token = app.user("sol@example.com").await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let envs = codex_home(&app, &token, home.path());
    anthropic.push(anthropic_sse(
        &[
            json!({"type": "tool_use", "id": "toolu_sol", "name": "functions__exec",
            "input": {"input": exec_input("echo claude-sol-$((40+2)) > proof.txt")}}),
        ],
        "tool_use",
    ));
    anthropic.push(anthropic_sse(
        &[json!({"type": "text", "text": "Written via Claude with the default model."})],
        "end_turn",
    ));
    let out = run(
        &codex,
        &[&CODEX_FLAGS[..], &["write the proof file"]].concat(),
        work.path(),
        &envs,
    )
    .await;
    assert!(
        out.contains("Written via Claude with the default model."),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("proof.txt"))
            .unwrap()
            .trim(),
        "claude-sol-42"
    );
    let requests = anthropic.requests();
    let names: Vec<&str> = requests[0]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"functions__exec"), "{names:?}");
    let last = requests.last().unwrap().to_string();
    assert!(
        last.contains("tool_result") && last.contains("toolu_sol"),
        "{last}"
    );
}
