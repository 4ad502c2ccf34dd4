//! Nothing lost in the relay: the share of the prompt read from a provider's cache through Relay
//! equals a direct client's (Anthropic-style breakpoints, OpenAI-style automatic prefixes), with
//! and without notes, for `/v1/messages`, `/v1/chat/completions` and native legs; signed
//! thinking comes back unchanged; cached tokens are reported in every door and in metrics.

use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::caching_fake::CachingUpstream;
use crate::helpers::{TestApp, body, open_config};

const PROJECT: &str = "cachedproj";

/// `a` answers through an `anthropic` provider, `o` through an `openai` one, both `fake`.
async fn app(fake: &CachingUpstream) -> TestApp {
    let url = fake.url.clone();
    TestApp::spawn_with(move |dir| {
        let mut c = open_config(dir);
        for (name, kind, base) in [
            ("a", ProviderKind::Anthropic, url.clone()),
            ("o", ProviderKind::Openai, url.clone()),
        ] {
            c.providers.push(ProviderConfig {
                base_url: Some(base),
                ..ProviderConfig::new(name, kind)
            });
            c.models.push(ModelConfig {
                name: name.into(),
                provider: name.into(),
                upstream: format!("{name}-up"),
                ..Default::default()
            });
        }
        c
    })
    .await
}

async fn with_notes(app: &TestApp) {
    app.remember(None, PROJECT, "Run tests with cargo test -p relay-server.")
        .await;
    app.remember(None, PROJECT, "Never log tokens.").await;
}

fn long_system() -> String {
    "You are a coding agent. Follow the repository's conventions. ".repeat(100)
}

fn result_text(leg: usize) -> String {
    format!("line {leg}: fn main() {{ println!(\"hello\"); }} // ").repeat(12)
}

/// Posts `body` to `path` through Relay, with the notes' project when `notes`.
async fn via_relay(app: &TestApp, path: &str, body: &Value, notes: bool) -> Value {
    let mut r = app.client.post(app.url(path)).json(body);
    if notes {
        r = r.header("x-relay-project", PROJECT);
    }
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    crate::helpers::body(r).await
}

async fn direct(fake: &CachingUpstream, path: &str, body: &Value) {
    let r = reqwest::Client::new()
        .post(format!("{}{path}", fake.url))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.bytes().await.unwrap();
}

/// A Claude Code-style session of `legs` tool legs: system blocks with a breakpoint, the newest
/// message marked (rolling).
fn messages_requests(legs: usize) -> Vec<Value> {
    let tools = json!([{"name": "bash", "description": "Run a command", "input_schema": {"type": "object"}}]);
    let mut history: Vec<Value> =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "Fix the build."}]})];
    let mut out = Vec::new();
    for leg in 0..legs {
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
            "messages": messages, "metadata": {"user_id": "u1"}, "top_k": 5}));
        let id = format!("toolu_{leg}");
        history.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "bash", "input": {"command": "cargo build"}}]}));
        history.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": result_text(leg)}]}));
    }
    out
}

/// The same kind of session in Chat Completions form.
fn chat_requests(legs: usize) -> Vec<Value> {
    let tools = json!([{"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": {"type": "object"}}}]);
    let mut history = vec![
        json!({"role": "system", "content": long_system()}),
        json!({"role": "user", "content": "Fix the build."}),
    ];
    let mut out = Vec::new();
    for leg in 0..legs {
        out.push(
            json!({"model": "o", "tools": tools, "messages": history.clone(),
            "prompt_cache_key": "client-key", "reasoning_effort": "low", "user": "u1",
            "parallel_tool_calls": false, "service_tier": "auto"}),
        );
        let id = format!("call_{leg}");
        history.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"cargo build\"}"}}]}));
        history.push(json!({"role": "tool", "tool_call_id": id, "content": result_text(leg)}));
    }
    out
}

fn assert_close(relay: f64, direct: f64, exact: bool) {
    assert!(direct > 0.5, "direct share {direct}");
    if exact {
        assert!(
            (relay - direct).abs() < 1e-9,
            "relay {relay} vs direct {direct}"
        );
    } else {
        assert!(relay >= 0.95 * direct, "relay {relay} vs direct {direct}");
    }
}

#[tokio::test]
async fn messages_through_relay_read_the_cache_as_much_as_direct_with_and_without_notes() {
    for notes in [false, true] {
        let (direct_fake, relay_fake) = (
            CachingUpstream::start().await,
            CachingUpstream::start().await,
        );
        let app = app(&relay_fake).await;
        if notes {
            with_notes(&app).await;
        }
        for req in messages_requests(8) {
            direct(&direct_fake, "/v1/messages", &req).await;
            let answer = via_relay(&app, "/v1/messages", &req, notes).await;
            // Anthropic's split: input_tokens excludes what was read from and written to the cache.
            let (total, read, written) = *relay_fake.counts().last().unwrap();
            assert_eq!(
                answer["usage"],
                json!({"input_tokens": total - read - written, "output_tokens": 1,
                    "cache_read_input_tokens": read, "cache_creation_input_tokens": written})
            );
        }
        assert_close(relay_fake.cache_share(), direct_fake.cache_share(), !notes);
        // Reads at 0.1x, writes at 1.25x: the input bill through Relay is the direct one.
        assert!(
            relay_fake.bill() <= 1.05 * direct_fake.bill(),
            "{} vs {}",
            relay_fake.bill(),
            direct_fake.bill()
        );
        // The client's own fields arrive as it set them; the notes follow its system blocks.
        let sent = relay_fake.bodies().pop().unwrap();
        // ... but for the identifier providers see, which Relay owns (issue 38).
        assert_eq!(sent["top_k"], json!(5));
        let id = sent["metadata"]["user_id"].as_str().unwrap();
        assert!(id.starts_with("relay-") && id != "u1", "{id}");
        assert_eq!(
            sent["system"][0]["cache_control"],
            json!({"type": "ephemeral", "ttl": "1h"})
        );
        let blocks = sent["system"].as_array().unwrap().len();
        assert_eq!(blocks, if notes { 2 } else { 1 });
        if notes {
            assert!(
                sent["system"][1]["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("<project-notes>")
            );
        }
    }
}

#[tokio::test]
async fn chat_completions_through_relay_read_the_cache_as_much_as_direct_with_and_without_notes() {
    for notes in [false, true] {
        let (direct_fake, relay_fake) = (
            CachingUpstream::start().await,
            CachingUpstream::start().await,
        );
        let app = app(&relay_fake).await;
        if notes {
            with_notes(&app).await;
        }
        for req in chat_requests(8) {
            direct(&direct_fake, "/chat/completions", &req).await;
            let answer = via_relay(&app, "/v1/chat/completions", &req, notes).await;
            let (total, read, _) = *relay_fake.counts().last().unwrap();
            assert_eq!(answer["usage"]["prompt_tokens"], total);
            assert_eq!(
                answer["usage"]["prompt_tokens_details"],
                json!({"cached_tokens": read})
            );
        }
        assert_close(relay_fake.cache_share(), direct_fake.cache_share(), !notes);
        let sent = relay_fake.bodies().pop().unwrap();
        for field in ["reasoning_effort", "parallel_tool_calls", "service_tier"] {
            assert_eq!(sent[field], chat_requests(1)[0][field], "{field}");
        }
        // Relay owns the identifier and keeps the client's cache key in the account's namespace
        // (issue 38): the same key on every call, so the provider's cache is shared as direct.
        let id = sent["user"].as_str().unwrap();
        assert!(id.starts_with("relay-"), "{id}");
        assert_eq!(
            sent["prompt_cache_key"],
            format!(
                "{id}:{}",
                chat_requests(1)[0]["prompt_cache_key"].as_str().unwrap()
            )
        );
        if notes {
            assert_eq!(sent["messages"][0]["content"], long_system());
            assert!(
                sent["messages"][1]["content"]
                    .as_str()
                    .unwrap()
                    .starts_with("<project-notes>")
            );
        }
    }
}

/// Native legs of a tool session: the NDJSON requests, then each one's usage line.
async fn native_session(app: &TestApp, model: &str, legs: usize, notes: bool) -> Vec<Value> {
    let mut messages = vec![
        json!({"role": "system", "content": long_system()}),
        json!({"role": "user", "content": "Fix the build."}),
    ];
    let tools =
        json!([{"name": "bash", "description": "Run a command", "parameters": {"type": "object"}}]);
    let mut usages = Vec::new();
    for leg in 0..legs {
        let mut req = json!({"model": model, "messages": messages, "tools": tools});
        if notes {
            req["project_id"] = json!(PROJECT);
        }
        let (_, lines) = app.leg(None, &req).await;
        usages.push(lines.last().unwrap()["usage"].clone());
        let id = format!("call_{leg}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "name": "bash", "arguments": "{\"command\":\"cargo build\"}"}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": result_text(leg)}));
        if leg == 3 {
            // A later user message does not re-choose the notes (the first one ranks them).
            messages.push(json!({"role": "user", "content": "Also keep the logs quiet."}));
        }
    }
    usages
}

#[tokio::test]
async fn native_legs_to_an_anthropic_provider_mark_breakpoints_and_read_the_cache() {
    for notes in [false, true] {
        let relay_fake = CachingUpstream::start().await;
        let app = app(&relay_fake).await;
        if notes {
            with_notes(&app).await;
        }
        let usages = native_session(&app, "a", 8, notes).await;
        let counts = relay_fake.counts();
        for (usage, (total, read, written)) in usages.iter().zip(&counts) {
            assert_eq!(
                usage["input_tokens"], *total,
                "input_tokens is every prompt token"
            );
            assert_eq!(
                usage
                    .get("cached_input_tokens")
                    .cloned()
                    .unwrap_or(json!(0)),
                json!(read)
            );
            assert_eq!(
                usage.get("cache_write_tokens").cloned().unwrap_or(json!(0)),
                json!(written)
            );
        }
        // Direct: a client sending the very same prompts, marked as Claude Code marks them
        // (the end of the system prompt, the newest message).
        let direct_fake = CachingUpstream::start().await;
        let bodies = relay_fake.bodies();
        for sent in &bodies {
            let markers = [&sent["tools"], &sent["system"]]
                .iter()
                .map(|v| {
                    v.as_array().map_or(0, |a| {
                        a.iter()
                            .filter(|b| b.get("cache_control").is_some())
                            .count()
                    })
                })
                .sum::<usize>();
            assert!(markers >= 2, "tools and system are marked: {sent}");
            let mut plain = sent.clone();
            for t in plain["tools"].as_array_mut().unwrap() {
                t.as_object_mut().unwrap().remove("cache_control");
            }
            let system = plain["system"].as_array_mut().unwrap();
            for b in system.iter_mut() {
                b.as_object_mut().unwrap().remove("cache_control");
            }
            system.last_mut().unwrap()["cache_control"] = json!({"type": "ephemeral"});
            direct(&direct_fake, "/v1/messages", &plain).await;
        }
        assert_close(relay_fake.cache_share(), direct_fake.cache_share(), false);
        // The notes block is the same bytes on every leg.
        if notes {
            let first = &bodies[0]["system"][1];
            assert!(
                first["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("<project-notes>")
            );
            assert!(bodies.iter().all(|b| &b["system"][1] == first));
        }
    }
}

#[tokio::test]
async fn native_legs_to_an_openai_provider_read_the_cache_as_much_as_direct() {
    for notes in [false, true] {
        let relay_fake = CachingUpstream::start().await;
        let app = app(&relay_fake).await;
        if notes {
            with_notes(&app).await;
        }
        let usages = native_session(&app, "o", 8, notes).await;
        let counts = relay_fake.counts();
        for (usage, (_, read, _)) in usages.iter().zip(&counts) {
            assert_eq!(usage["cached_input_tokens"], *read);
        }
        // Direct: the client's own messages in Chat Completions form.
        let direct_fake = CachingUpstream::start().await;
        for sent in relay_fake.bodies() {
            let mut plain = sent.clone();
            let messages: Vec<Value> = sent["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| {
                    !m["content"]
                        .as_str()
                        .is_some_and(|c| c.starts_with("<project-notes>"))
                })
                .cloned()
                .collect();
            plain["messages"] = json!(messages);
            direct(&direct_fake, "/chat/completions", &plain).await;
        }
        assert_close(relay_fake.cache_share(), direct_fake.cache_share(), !notes);
    }
}

#[tokio::test]
async fn signed_thinking_comes_back_unchanged_and_is_accepted_on_the_next_turn() {
    let fixture = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/anthropic/pydantic-ai__anthropic_thinking_stream.0.sse");
    let recorded = std::fs::read_to_string(fixture).unwrap();
    let signature = recorded
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find_map(|d| d["delta"]["signature"].as_str().map(str::to_owned))
        .unwrap();
    let fake = CachingUpstream::start().await;
    fake.think_with(recorded);
    let app = app(&fake).await;
    let first = json!({"model": "a", "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "How do I cross the street?"}]});
    let r = app
        .client
        .post(app.url("/v1/messages"))
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .json(&first)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let answer = body(r).await;
    assert_eq!(answer["content"][0]["type"], "thinking");
    assert_eq!(answer["content"][0]["signature"], signature.as_str());
    assert!(
        answer["content"][0]["thinking"]
            .as_str()
            .unwrap()
            .starts_with("This is a straightforward")
    );
    assert_eq!(fake.bodies()[0]["thinking"], first["thinking"]);
    assert_eq!(
        fake.header(0, "anthropic-beta").as_deref(),
        Some("interleaved-thinking-2025-05-14")
    );
    // The next turn sends the signed block back; the upstream accepts only its own signature.
    let mut next = first.clone();
    next["messages"] = json!([first["messages"][0], {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": "Thanks."}]);
    let r = app.post("/v1/messages", None, &next).await;
    assert_eq!(r.status(), StatusCode::OK);
    let sent = &fake.bodies()[1];
    assert_eq!(
        sent["messages"][1]["content"][0]["signature"],
        signature.as_str()
    );
    // Streamed: thinking_delta pieces, then the signature_delta that closes the block.
    let mut streamed = first.clone();
    streamed["stream"] = json!(true);
    let text = app
        .post("/v1/messages", None, &streamed)
        .await
        .text()
        .await
        .unwrap();
    // The provider's own events reach the client (issue 39): compared as JSON, in its key order.
    let events: Vec<Value> = crate::compat::sse_events(&text)
        .into_iter()
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect();
    assert!(
        events.iter().any(|e| e["type"] == "content_block_start"
            && e["content_block"] == json!({"type": "thinking", "thinking": "", "signature": ""})),
        "{text}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["delta"]
                == json!({"type": "signature_delta", "signature": signature.as_str()})),
        "{text}"
    );
    // A forged signature is refused by the upstream: the check is real.
    let mut forged = next.clone();
    forged["messages"][1]["content"][0]["signature"] = json!("forged");
    assert_ne!(
        app.post("/v1/messages", None, &forged).await.status(),
        StatusCode::OK
    );
    // anthropic-beta is Anthropic's: an OpenAI-kind provider never sees it.
    let r = app.client.post(app.url("/v1/messages"))
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .json(&json!({"model": "o", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}))
        .send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let last = fake.bodies().len() - 1;
    assert_eq!(fake.header(last, "anthropic-beta"), None);
}

#[tokio::test]
async fn cached_tokens_are_counted_by_kind_in_metrics() {
    let fake = CachingUpstream::start().await;
    let app = app(&fake).await;
    for req in messages_requests(3) {
        via_relay(&app, "/v1/messages", &req, false).await;
    }
    let counts = fake.counts();
    let sum = |f: fn(&(u64, u64, u64)) -> u64| counts.iter().map(f).sum::<u64>();
    let metrics = app.get("/metrics", None).await.text().await.unwrap();
    for (kind, n) in [
        ("input", sum(|c| c.0)),
        ("cached_input", sum(|c| c.1)),
        ("cache_write", sum(|c| c.2)),
        ("output", 3),
    ] {
        let line = format!(r#"relay_tokens_total{{model="a",kind="{kind}"}} {n}"#);
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    assert!(
        metrics.contains("# HELP relay_tokens_total Tokens by model and kind"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_chat_completions_call_to_an_anthropic_provider_gets_breakpoints_and_reads_the_cache() {
    let fake = CachingUpstream::start().await;
    let app = app(&fake).await;
    for mut req in chat_requests(6) {
        req["model"] = json!("a");
        let answer = via_relay(&app, "/v1/chat/completions", &req, false).await;
        let (total, read, _) = *fake.counts().last().unwrap();
        assert_eq!(answer["usage"]["prompt_tokens"], total);
        assert_eq!(
            answer["usage"]["prompt_tokens_details"],
            json!({"cached_tokens": read})
        );
    }
    let sent = fake.bodies().pop().unwrap();
    assert_eq!(
        sent["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(fake.cache_share() > 0.6, "{}", fake.cache_share());
}
