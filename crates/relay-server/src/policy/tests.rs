use serde_json::{Value, json};

use super::*;

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

fn plain() -> ModelPolicy {
    ModelPolicy::default()
}

#[test]
fn multipliers_are_refused_naming_the_field() {
    let p = plain();
    let chain = Chain(&[&p]);
    let e = check(Door::ChatCompletions, &map(json!({"n": 128})), chain).unwrap_err();
    assert!(e.message.starts_with("n:"), "{}", e.message);
    assert!(check(Door::ChatCompletions, &map(json!({"n": 1})), chain).is_ok());
    let e = check(Door::ChatCompletions, &map(json!({"best_of": 3})), chain).unwrap_err();
    assert!(e.message.starts_with("best_of:"));
    for tier in ["auto", "default", "flex"] {
        assert!(check(Door::Responses, &map(json!({"service_tier": tier})), chain).is_ok());
    }
    let e = check(
        Door::Responses,
        &map(json!({"service_tier": "priority"})),
        chain,
    )
    .unwrap_err();
    assert!(e.message.starts_with("service_tier:"));
    let priority = ModelPolicy {
        service_tiers: vec!["priority".into()],
        ..plain()
    };
    assert!(
        check(
            Door::Responses,
            &map(json!({"service_tier": "priority"})),
            Chain(&[&priority])
        )
        .is_ok()
    );
    // A chain allows it only where every model does.
    assert!(
        check(
            Door::Responses,
            &map(json!({"service_tier": "priority"})),
            Chain(&[&priority, &p])
        )
        .is_err()
    );
    let e = check(
        Door::ChatCompletions,
        &map(json!({"logprobs": true, "top_logprobs": 5})),
        chain,
    )
    .unwrap_err();
    assert!(e.message.starts_with("top_logprobs:"));
    let e = check(
        Door::ChatCompletions,
        &map(json!({"modalities": ["text", "audio"]})),
        chain,
    )
    .unwrap_err();
    assert!(e.message.starts_with("modalities:"));
}

#[test]
fn hosted_tools_and_provider_state_are_refused_unless_allowed() {
    let p = plain();
    let chain = Chain(&[&p]);
    let cases = [
        (
            Door::Responses,
            json!({"tools": [{"type": "function", "name": "f"}, {"type": "mcp", "server_url": "https://evil", "require_approval": "never"}]}),
            "tools[1]:",
        ),
        (
            Door::Responses,
            json!({"tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}),
            "tools[0]:",
        ),
        (
            Door::Responses,
            json!({"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}),
            "tools[0]:",
        ),
        (
            Door::Responses,
            json!({"tools": [{"type": "image_generation"}]}),
            "tools[0]:",
        ),
        (Door::Responses, json!({"background": true}), "background:"),
        (
            Door::Responses,
            json!({"conversation": "conv_1"}),
            "conversation:",
        ),
        (
            Door::Responses,
            json!({"prompt": {"id": "pmpt_1"}}),
            "prompt:",
        ),
        (
            Door::Responses,
            json!({"input": [{"type": "reasoning", "id": "rs_1"}]}),
            "input[0]:",
        ),
        (
            Door::Messages,
            json!({"mcp_servers": [{"type": "url", "url": "https://evil"}]}),
            "mcp_servers:",
        ),
        (
            Door::Messages,
            json!({"container": "container_1"}),
            "container:",
        ),
        (
            Door::Messages,
            json!({"tools": [{"type": "code_execution_20250522", "name": "code_execution"}]}),
            "tools[0]:",
        ),
        (
            Door::ChatCompletions,
            json!({"messages": [{"role": "assistant", "audio": {"id": "audio_1"}}]}),
            "messages[0].audio.id:",
        ),
    ];
    for (door, body, field) in cases {
        let e = check(door, &map(body.clone()), chain).unwrap_err();
        assert!(e.message.starts_with(field), "{body}: {}", e.message);
    }
    // Client tools pass, Anthropic's schema-less client tools too.
    let ok = json!({"tools": [{"name": "Bash", "input_schema": {}}, {"type": "bash_20250124", "name": "bash"}]});
    assert!(check(Door::Messages, &map(ok), chain).is_ok());
    // A reasoning item with its encrypted content is the client's own.
    let ok = json!({"input": [{"type": "reasoning", "id": "rs_1", "encrypted_content": "enc", "summary": []}]});
    assert!(check(Door::Responses, &map(ok), chain).is_ok());
    let allowed = ModelPolicy {
        hosted_tools: vec!["code_execution".into()],
        ..plain()
    };
    let body =
        map(json!({"tools": [{"type": "code_execution_20250522", "name": "code_execution"}]}));
    assert!(check(Door::Messages, &body, Chain(&[&allowed])).is_ok());
}

#[test]
fn search_tools_agents_send_by_default_are_left_out_unless_allowed() {
    let p = plain();
    let mut body =
        map(json!({"tools": [{"type": "custom", "name": "apply_patch"}, {"type": "web_search"}]}));
    let removed = strip_unallowed_search(Door::Responses, &mut body, Chain(&[&p]));
    assert_eq!(removed, ["web_search"]);
    assert_eq!(
        body["tools"],
        json!([{"type": "custom", "name": "apply_patch"}])
    );
    let allowed = ModelPolicy {
        hosted_tools: vec!["web_search".into()],
        ..plain()
    };
    let mut body = map(json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}));
    assert!(strip_unallowed_search(Door::Messages, &mut body, Chain(&[&allowed])).is_empty());
    assert_eq!(body["tools"].as_array().unwrap().len(), 1);
}

#[test]
fn relay_owns_store_identity_and_the_cache_key_namespace() {
    let me = Identity::of("secret-secret-secret", "u1");
    let other = Identity::of("secret-secret-secret", "u2");
    assert_ne!(me, other);
    assert_ne!(me, Identity::of("another-secret-value", "u1"));
    let mut body = map(
        json!({"store": true, "user": "victim@example.com", "safety_identifier": "x",
        "prompt_cache_key": "k", "temperature": 0.3}),
    );
    rewrite(Door::Responses, &mut body, &me);
    assert_eq!(body["store"], false);
    assert_eq!(body["user"], me.id());
    assert_eq!(body["safety_identifier"], me.id());
    assert_eq!(body["prompt_cache_key"], format!("{}:k", me.id()));
    assert_eq!(body["temperature"], 0.3);
    let mut body = map(json!({"metadata": {"user_id": "someone-else"}}));
    rewrite(Door::Messages, &mut body, &me);
    assert_eq!(body["metadata"]["user_id"], me.id());
}

#[test]
fn output_is_clamped_and_thinking_stays_below_it() {
    let mut body =
        map(json!({"max_tokens": 64000, "thinking": {"type": "enabled", "budget_tokens": 32000}}));
    clamp_output(&mut body, 4096, "max_tokens");
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["thinking"]["budget_tokens"], 4095);
    let mut body =
        map(json!({"max_tokens": 64000, "thinking": {"type": "enabled", "budget_tokens": 2000}}));
    clamp_output(&mut body, 1000, "max_tokens");
    assert!(body.get("thinking").is_none());
    let mut body = map(json!({}));
    clamp_output(&mut body, 10, "max_output_tokens");
    assert_eq!(body["max_output_tokens"], 10);
    let mut body = map(json!({"max_completion_tokens": 5}));
    clamp_output(&mut body, 10, "max_tokens");
    assert_eq!(body, map(json!({"max_completion_tokens": 5})));
}

#[test]
fn betas_pass_only_when_listed() {
    let p = plain();
    let long = ModelPolicy {
        anthropic_betas: vec!["context-1m-2025-08-07".into()],
        ..plain()
    };
    let header = "claude-code-20250219, made-up-2099-01-01,context-1m-2025-08-07";
    let (kept, dropped) = betas(header, &[], Chain(&[&p]));
    assert_eq!(kept.as_deref(), Some("claude-code-20250219"));
    assert_eq!(dropped, ["made-up-2099-01-01", "context-1m-2025-08-07"]);
    let (kept, _) = betas(header, &["made-up-2099-01-01".into()], Chain(&[&long]));
    assert_eq!(
        kept.as_deref(),
        Some("claude-code-20250219,made-up-2099-01-01,context-1m-2025-08-07")
    );
    assert_eq!(betas("made-up", &[], Chain(&[&p])).0, None);
}

#[test]
fn hosted_tool_names_drop_their_version() {
    assert_eq!(hosted_tool_name("web_search_20250305"), "web_search");
    assert_eq!(hosted_tool_name("web_search_preview"), "web_search");
    assert_eq!(hosted_tool_name("code_interpreter"), "code_interpreter");
}
