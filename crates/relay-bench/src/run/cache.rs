//! The prompt-cache rows (issue 32): one 20-leg tool session per door, sent once to a caching
//! mock directly and once through Relay to a second one, without and with notes injected; the
//! share of prompt tokens read from the cache and the input bill of each.
//!
//! Doors: `/v1/messages` to an `anthropic` provider (the client marks breakpoints as Claude Code
//! does: the end of the system prompt and the newest message), `/v1/chat/completions` to an
//! `openai` provider (automatic caching, no markers), and native `/v1/agent/stream` legs to each,
//! where Relay places the breakpoints itself; their direct client sends the same conversation in
//! the provider's own form, marked as Claude Code marks it.

use std::path::Path;

use anyhow::{Result, bail};
use serde::Serialize;
use serde_json::{Value, json};

use super::Options;
use super::steps::{http_client, start_relay};
use crate::cache_mock::{CacheMock, Session};

/// Legs per session.
pub const LEGS: usize = 20;
const PROJECT: &str = "bench-cache";

/// One door, without or with notes: the mock's sums directly and through Relay.
#[derive(Debug, Clone, Serialize)]
pub struct CacheRow {
    pub door: String,
    pub notes: bool,
    pub direct: Session,
    pub relay: Session,
}

impl CacheRow {
    /// Cache share through Relay ÷ direct (target ≥ 0.95).
    pub fn share_ratio(&self) -> f64 {
        self.relay.share() / self.direct.share().max(f64::MIN_POSITIVE)
    }

    /// Input bill through Relay ÷ direct (target ≤ 1.05).
    pub fn bill_ratio(&self) -> f64 {
        self.relay.bill() / self.direct.bill().max(f64::MIN_POSITIVE)
    }
}

fn config(dir: &Path, upstream: &str) -> Result<std::path::PathBuf> {
    let db = dir.join("cache.db");
    let text = format!(
        r#"bind = "127.0.0.1:0"

[memory]
url = "sqlite://{db}"

[[providers]]
name = "a"
kind = "anthropic"
base_url = "{upstream}"

[[providers]]
name = "o"
kind = "openai"
base_url = "{upstream}"

[[models]]
name = "a"
provider = "a"
upstream = "a-up"

[[models]]
name = "o"
provider = "o"
upstream = "o-up"

[limits]
agent_per_minute = 100000000
agent_burst = 10000000
"#,
        db = db.display()
    );
    let path = dir.join("relay-cache.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}

fn long_system() -> String {
    "You are a coding agent. Follow the repository's conventions. ".repeat(100)
}

fn result_text(leg: usize) -> String {
    format!("line {leg}: fn main() {{ println!(\"hello\"); }} // ").repeat(12)
}

/// The client's conversation in native form after `legs` tool legs (a user message after the
/// fourth, as a person adds one mid-task).
fn native_messages(legs: usize) -> Vec<Value> {
    let mut m = vec![
        json!({"role": "system", "content": long_system()}),
        json!({"role": "user", "content": "Fix the build."}),
    ];
    for leg in 0..legs {
        let id = format!("call_{leg}");
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "name": "bash", "arguments": "{\"command\":\"cargo build\"}"}]}));
        m.push(json!({"role": "tool", "tool_call_id": id, "content": result_text(leg)}));
        if leg == 3 {
            m.push(json!({"role": "user", "content": "Also keep the logs quiet."}));
        }
    }
    m
}

/// The same conversation as Chat Completions messages.
fn chat_messages(legs: usize) -> Vec<Value> {
    native_messages(legs)
        .into_iter()
        .map(|mut m| {
            if let Some(calls) = m["tool_calls"].as_array_mut() {
                for c in calls.iter_mut() {
                    *c = json!({"id": c["id"], "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]}});
                }
            }
            m
        })
        .collect()
}

fn chat_tools() -> Value {
    json!([{"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": {"type": "object"}}}])
}

/// Claude Code's session through `/v1/messages`: the system prompt marked (1 h) and the newest
/// message's last block marked (rolling).
fn messages_requests() -> Vec<Value> {
    let tools = json!([{"name": "bash", "description": "Run a command", "input_schema": {"type": "object"}}]);
    let mut history =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "Fix the build."}]})];
    let mut out = Vec::new();
    for leg in 0..LEGS {
        let mut messages = history.clone();
        if let Some(last) = messages
            .last_mut()
            .and_then(|m| m["content"].as_array_mut())
            .and_then(|c| c.last_mut())
        {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
        out.push(json!({"model": "a", "max_tokens": 64, "stream": false, "tools": tools,
            "system": [{"type": "text", "text": long_system(), "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": messages}));
        let id = format!("toolu_{leg}");
        history.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "bash", "input": {"command": "cargo build"}}]}));
        history.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": result_text(leg)}]}));
    }
    out
}

fn chat_requests() -> Vec<Value> {
    (0..LEGS)
        .map(|leg| json!({"model": "o", "tools": chat_tools(), "messages": chat_messages(leg)}))
        .collect()
}

/// What Relay sent to the anthropic mock, with Relay's markers replaced by Claude Code's (the
/// end of the system prompt and the newest message's last block): the direct client's requests.
fn marked_as_claude_code(sent: &Value) -> Value {
    let mut plain = sent.clone();
    for key in ["tools", "system"] {
        for b in plain[key].as_array_mut().into_iter().flatten() {
            if let Some(o) = b.as_object_mut() {
                o.remove("cache_control");
            }
        }
    }
    for m in plain["messages"].as_array_mut().into_iter().flatten() {
        for b in m["content"].as_array_mut().into_iter().flatten() {
            if let Some(o) = b.as_object_mut() {
                o.remove("cache_control");
            }
        }
    }
    if let Some(last) = plain["system"].as_array_mut().and_then(|s| s.last_mut()) {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    if let Some(last) = plain["messages"]
        .as_array_mut()
        .and_then(|m| m.last_mut())
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|c| c.last_mut())
    {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    plain
}

async fn post(http: &reqwest::Client, url: &str, body: &Value, notes: bool) -> Result<()> {
    let mut r = http.post(url).json(body);
    if notes {
        r = r.header("x-relay-project", PROJECT);
    }
    let r = r.send().await?;
    let status = r.status();
    let text = r.text().await?;
    if !status.is_success() || text.contains("\"type\":\"error\"") {
        bail!("{url} answered {status}: {text}");
    }
    Ok(())
}

/// Every door, without and with notes, against one Relay.
pub async fn measure(opts: &Options, dir: &Path) -> Result<Vec<CacheRow>> {
    let http = http_client()?;
    let (direct, upstream) = (CacheMock::start().await?, CacheMock::start().await?);
    let config = config(dir, &upstream.url)?;
    let relay = start_relay(opts, &config, dir, &http, 90).await?;
    let base = relay.base();
    let mut rows = Vec::new();
    for notes in [false, true] {
        if notes {
            for note in [
                "Run tests with cargo test -p relay-server.",
                "Never log tokens.",
            ] {
                post(
                    &http,
                    &format!("{base}/v1/memory/remember"),
                    &json!({"note": note, "project_id": PROJECT}),
                    false,
                )
                .await?;
            }
        }
        for door in [
            "/v1/messages",
            "/v1/chat/completions",
            "native: anthropic",
            "native: openai",
        ] {
            direct.reset();
            upstream.reset();
            match door {
                "/v1/messages" => {
                    for req in messages_requests() {
                        post(&http, &format!("{}/v1/messages", direct.url), &req, false).await?;
                        post(&http, &format!("{base}/v1/messages"), &req, notes).await?;
                    }
                }
                "/v1/chat/completions" => {
                    for req in chat_requests() {
                        post(
                            &http,
                            &format!("{}/chat/completions", direct.url),
                            &req,
                            false,
                        )
                        .await?;
                        post(&http, &format!("{base}/v1/chat/completions"), &req, notes).await?;
                    }
                }
                _ => {
                    let model = if door.ends_with("anthropic") {
                        "a"
                    } else {
                        "o"
                    };
                    for leg in 0..LEGS {
                        let mut req = json!({"model": model, "messages": native_messages(leg),
                            "tools": [{"name": "bash", "description": "Run a command", "parameters": {"type": "object"}}]});
                        if notes {
                            req["project_id"] = json!(PROJECT);
                        }
                        post(&http, &format!("{base}/v1/agent/stream"), &req, false).await?;
                        if model == "o" {
                            let plain = json!({"model": "o", "tools": chat_tools(), "messages": chat_messages(leg)});
                            post(
                                &http,
                                &format!("{}/chat/completions", direct.url),
                                &plain,
                                false,
                            )
                            .await?;
                        }
                    }
                    if model == "a" {
                        for sent in upstream.bodies() {
                            let url = format!("{}/v1/messages", direct.url);
                            post(&http, &url, &marked_as_claude_code(&sent), false).await?;
                        }
                    }
                }
            }
            let row = CacheRow {
                door: door.into(),
                notes,
                direct: direct.session(),
                relay: upstream.session(),
            };
            if row.direct.requests != LEGS || row.relay.requests != LEGS {
                bail!("the {door} session did not reach the mocks {LEGS} times: {row:?}");
            }
            eprintln!(
                "  {door}{}: cache share direct {:.3}, through Relay {:.3} ({:.3}×), bill {:.3}×",
                if notes { " with notes" } else { "" },
                row.direct.share(),
                row.relay.share(),
                row.share_ratio(),
                row.bill_ratio()
            );
            rows.push(row);
        }
    }
    relay.stop().await?;
    Ok(rows)
}
