//! `/mcp` through the official Python MCP SDK (`mcp` on PyPI, `tests/sdk/mcp_sdk.py`): the
//! initialize handshake at the SDK's newest handshake version (2025-11-25) and `server/discover`
//! at 2026-07-28, each listing the tools and calling every one, on a relay with accounts. The SDK
//! lives in the venv `.ci/run` creates (see `compat_sdk::python`).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::compat_sdk::python;
use crate::helpers::{TestApp, body};

async fn sdk(app: &TestApp, mode: &str, token: &str, project: &str, client: &str) -> Option<Value> {
    let python = python()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/mcp_sdk.py");
    let mut command = std::process::Command::new(python);
    command
        .arg(script)
        .arg(mode)
        .env("RELAY_URL", format!("http://{}", app.addr))
        .env("RELAY_TOKEN", token)
        .env("RELAY_PROJECT", project)
        .env("MCP_CLIENT_NAME", client);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "{mode}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

#[tokio::test]
async fn the_python_sdk_handshakes_discovers_and_calls_every_tool() {
    let app = TestApp::with_auth().await;
    let token = app.user("sdk@example.com").await;
    for (mode, version, client) in [
        ("legacy", "2025-11-25", "claude-code"),
        ("auto", "2026-07-28", "codex-mcp-client"),
    ] {
        let project = format!("sdk-{mode}");
        let Some(out) = sdk(&app, mode, &token, &project, client).await else {
            return;
        };
        assert_eq!(out["protocol_version"], version, "{out}");
        assert_eq!(
            out["tools"],
            json!(["forget", "recall", "remember", "search_notes"])
        );
        assert!(
            out["descriptions"]["remember"]
                .as_str()
                .unwrap()
                .contains("unprompted")
        );
        assert_eq!(out["remember"]["error"], false, "{out}");
        let id = out["remember"]["structured"]["id"].as_str().unwrap();
        assert!(id.starts_with("mem#"), "{id}");
        assert_eq!(
            out["recall"]["structured"]["notes"],
            json!([
                format!("build with cargo build --release ({mode})"),
                format!("tests need PostgreSQL on port 5432 ({mode})")
            ])
        );
        let found = out["search"]["structured"]["notes"].as_array().unwrap();
        assert!(
            found
                .iter()
                .any(|n| n["note"].as_str().unwrap().contains("PostgreSQL")),
            "{out}"
        );
        assert_eq!(out["forget"]["error"], false, "{out}");
        assert_eq!(out["forget_again"]["error"], true, "{out}");
        assert_eq!(out["remember_empty"]["error"], true, "{out}");
        assert_ne!(out["unknown_tool"], "answered", "{out}");
        assert_eq!(
            out["recall_after"]["notes"],
            json!([format!("tests need PostgreSQL on port 5432 ({mode})")])
        );
        // The notes are the account's, in the connection's project, by the client's name.
        let r = app
            .get(
                &format!("/v1/memory/list?project_id={project}"),
                Some(&token),
            )
            .await;
        let items = body(r).await["items"].as_array().unwrap().clone();
        assert_eq!(items.len(), 1);
        let author = if client == "claude-code" {
            "claude-code"
        } else {
            "codex"
        };
        assert_eq!(items[0]["author"], author);
    }
}
