//! Agent legs over real HTTP against a fake upstream: events, the tool round trip, what the
//! upstream receives per role, note injection, quota, the demo provider and `/v1/tools`.

use relay_server::config::{Config, ModelConfig, ProviderConfig, ProviderKind};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::{TestApp, auth_config, body, expect_error, open_config};

/// Two models on the fake upstream, `auto` = m1 then m2, no retries.
pub fn with_fake(mut c: Config, fake: &FakeUpstream) -> Config {
    c.providers = vec![ProviderConfig {
        base_url: Some(fake.base_url()),
        ..ProviderConfig::new("fake", ProviderKind::Openai)
    }];
    c.models = vec![
        ModelConfig {
            name: "m1".into(),
            provider: "fake".into(),
            upstream: "up-1".into(),
            ..Default::default()
        },
        ModelConfig {
            name: "m2".into(),
            provider: "fake".into(),
            upstream: "up-2".into(),
            ..Default::default()
        },
    ];
    c.routing.auto = vec!["m1".into(), "m2".into()];
    c.routing.retries = 0;
    c
}

pub async fn open_app(fake: &FakeUpstream) -> TestApp {
    TestApp::spawn_with(|dir| {
        let mut c = with_fake(open_config(dir), fake);
        c.limits.agent_burst = 1_000;
        c
    })
    .await
}

pub async fn auth_app(fake: &FakeUpstream, limit: i64) -> TestApp {
    TestApp::spawn_with(|dir| {
        let mut c = with_fake(auth_config(dir), fake);
        c.auth.as_mut().unwrap().default_limit = limit;
        c.limits.agent_burst = 1_000;
        c
    })
    .await
}

pub fn user_says(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

impl TestApp {
    /// Posts a leg and reads the whole NDJSON answer.
    pub async fn leg(&self, token: Option<&str>, leg: &Value) -> (StatusCode, Vec<Value>) {
        let r = self.post("/v1/agent/stream", token, leg).await;
        let status = r.status();
        if status != StatusCode::OK {
            return (status, vec![body(r).await]);
        }
        assert_eq!(r.headers()["content-type"], "application/x-ndjson");
        let text = r.text().await.unwrap();
        assert!(text.ends_with('\n'), "every line ends with a newline");
        let lines = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (status, lines)
    }
}

/// Asserts the stream shape: `start` first, exactly one terminal event, and it is last.
pub fn assert_one_terminal(lines: &[Value]) -> &Value {
    assert_eq!(lines[0]["event"], "start", "{lines:?}");
    let terminals: Vec<_> = lines
        .iter()
        .filter(|l| ["tool_calls", "done", "error"].contains(&l["event"].as_str().unwrap()))
        .collect();
    assert_eq!(terminals.len(), 1, "{lines:?}");
    lines.last().unwrap()
}

fn events(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|l| l["event"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_leg_streams_start_reasoning_text_and_done_with_usage() {
    let fake = FakeUpstream::start().await;
    fake.push(
        "up-1",
        Reply::Sse {
            chunks: vec![
                up::reasoning_chunk("thinking…"),
                up::text_chunk("Hello"),
                up::text_chunk(", wörld"),
                up::finish("stop"),
                up::usage(42, 7),
                up::DONE.into(),
            ],
            pause: std::time::Duration::ZERO,
        },
    );
    let app = open_app(&fake).await;
    let (status, lines) = app.leg(None, &user_says("hi")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        events(&lines),
        ["start", "reasoning", "text", "text", "done"]
    );
    let start = &lines[0];
    assert_eq!(start["model"], "m1");
    assert_eq!(start["request_id"].as_str().unwrap().len(), 32);
    assert_eq!(
        (start["notes"].as_u64(), start["note_ids"].clone()),
        (Some(0), json!([]))
    );
    assert_eq!(lines[1]["text"], "thinking…");
    let text: String = lines
        .iter()
        .filter(|l| l["event"] == "text")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello, wörld");
    assert_eq!(
        assert_one_terminal(&lines),
        &json!({"event": "done", "finish_reason": "stop", "usage": {"input_tokens": 42, "output_tokens": 7}})
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent["model"], "up-1");
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn a_tool_round_trip_takes_two_legs() {
    let fake = FakeUpstream::start().await;
    fake.push(
        "up-1",
        up::tool_call_reply("call_7", "read_file", r#"{"path":"src/main.rs"}"#),
    );
    fake.push("up-1", up::text_reply(&["The file ", "has a main."]));
    let app = open_app(&fake).await;
    let tools =
        json!([{"name": "read_file", "description": "d", "parameters": {"type": "object"}}]);
    let mut leg =
        json!({"messages": [{"role": "user", "content": "what is in main.rs?"}], "tools": tools});

    let (_, lines) = app.leg(None, &leg).await;
    let terminal = assert_one_terminal(&lines);
    assert_eq!(
        terminal,
        &json!({"event": "tool_calls",
                "calls": [{"id": "call_7", "name": "read_file", "arguments": "{\"path\":\"src/main.rs\"}"}],
                "usage": {"input_tokens": 20, "output_tokens": 5}})
    );

    // The client runs the tool and posts the next leg with the call and its result.
    let msgs = leg["messages"].as_array_mut().unwrap();
    msgs.push(json!({"role": "assistant", "content": null, "tool_calls": terminal["calls"]}));
    msgs.push(json!({"role": "tool", "tool_call_id": "call_7", "content": "fn main() {}"}));
    let (_, lines) = app.leg(None, &leg).await;
    assert_eq!(assert_one_terminal(&lines)["event"], "done");

    let second = &fake.requests()[1];
    let sent: Vec<&Value> = second["messages"].as_array().unwrap().iter().collect();
    assert_eq!(sent[1]["role"], "assistant");
    assert_eq!(sent[1]["tool_calls"][0]["id"], "call_7");
    assert_eq!(sent[1]["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(
        sent[1]["tool_calls"][0]["function"]["arguments"],
        "{\"path\":\"src/main.rs\"}"
    );
    assert_eq!(
        sent[2],
        &json!({"role": "tool", "tool_call_id": "call_7", "content": "fn main() {}"})
    );
}

#[tokio::test]
async fn the_openai_nested_tool_call_form_is_accepted() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    let leg = json!({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "list "}, {"type": "text", "text": "files"}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "list_dir", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}
    ]});
    let (status, lines) = app.leg(None, &leg).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(assert_one_terminal(&lines)["event"], "done");
    let sent = &fake.requests()[0]["messages"];
    assert_eq!(sent[0]["content"], "list files");
    assert_eq!(sent[1]["tool_calls"][0]["function"]["name"], "list_dir");
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": "client's own words", "parameters": {"type": "object", "properties": {}}})
}

#[tokio::test]
async fn each_tool_role_sends_upstream_exactly_its_tools_with_canonical_definitions() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    // Every role gets the basic tools; each adds its own, then the caller's custom tool.
    const BASIC: [&str; 10] = [
        "read_file",
        "list_dir",
        "grep",
        "find_files",
        "write_file",
        "edit_file",
        "run_command",
        "web_search",
        "write_plan",
        "create_pdf",
    ];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        BASIC
            .iter()
            .chain(extra)
            .copied()
            .chain(["my_custom_tool"])
            .collect()
    };
    let panes = [
        "open_pane",
        "spawn_agent",
        "send_keys",
        "send_agent",
        "read_pane",
        "read_agent",
        "list_panes",
    ];
    let every: Vec<Value> = with(&[&["remember", "recall"][..], &panes].concat())
        .iter()
        .map(|n| tool(n))
        .collect();
    // The agent orchestrator delegates writing: no write_file or edit_file of its own.
    let agent_orchestrator: Vec<&str> = with(&[
        "remember",
        "recall",
        "spawn_agent",
        "send_agent",
        "read_agent",
        "list_panes",
    ])
    .into_iter()
    .filter(|n| !["write_file", "edit_file"].contains(n))
    .collect();
    let cases: [(Value, Vec<&str>); 4] = [
        (Value::Null, with(&[])),
        (json!("worker"), with(&["remember", "recall"])),
        (
            json!("orchestrator"),
            with(&[
                "remember",
                "recall",
                "open_pane",
                "send_keys",
                "read_pane",
                "list_panes",
            ]),
        ),
        (json!("agent_orchestrator"), agent_orchestrator),
    ];
    for (i, (role, expected)) in cases.iter().enumerate() {
        let leg = json!({"messages": [{"role": "user", "content": "go"}], "tools": every, "tool_role": role});
        let (status, _) = app.leg(None, &leg).await;
        assert_eq!(status, StatusCode::OK);
        let sent = &fake.requests()[i]["tools"];
        let names: Vec<&str> = sent
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(&names, expected, "role {role}");
        for t in sent.as_array().unwrap() {
            let f = &t["function"];
            let name = f["name"].as_str().unwrap();
            if name == "my_custom_tool" {
                assert_eq!(
                    f["description"], "client's own words",
                    "pass-through tools are unchanged"
                );
            } else {
                let canonical = relay_wire::tools::definition(name).unwrap();
                assert_eq!(f["description"], canonical.description.as_str(), "{name}");
                assert_eq!(f["parameters"], canonical.parameters, "{name}");
            }
        }
    }
    // Nothing is added that the client did not send.
    let (_, _) = app
        .leg(
            None,
            &json!({"messages": [{"role": "user", "content": "go"}], "tool_role": "worker"}),
        )
        .await;
    let last = fake.requests().pop().unwrap();
    assert!(
        last.get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty)),
        "{last}"
    );
}

#[tokio::test]
async fn notes_are_injected_into_the_system_prompt_and_reported_in_start() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    let cwd = "/home/ada/relay";
    let project = relay_server::legs::project_of(
        &serde_json::from_value(json!({"messages": [], "cwd": cwd})).unwrap(),
    )
    .unwrap()
    .unwrap()
    .as_str()
    .to_owned();
    app.remember(None, &project, "Tests run with cargo test --workspace.")
        .await;
    app.remember(None, &project, "Never log tokens.").await;
    let leg = json!({"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "how do I test?"}], "cwd": cwd});
    let (_, lines) = app.leg(None, &leg).await;
    let start = &lines[0];
    assert_eq!(start["project_id"], project.as_str());
    assert_eq!(start["notes"], 2);
    assert_eq!(
        start["note_ids"],
        json!([
            format!("mem#local#{project}#1"),
            format!("mem#local#{project}#2")
        ])
    );
    // The client's system prompt stays as it was; the notes follow it as a message of their own,
    // so the client's prefix (and the provider's cache of it) is untouched.
    let sent = fake.requests()[0]["messages"].clone();
    assert_eq!(
        sent[0],
        json!({"role": "system", "content": "You are terse."})
    );
    let system = sent[1].clone();
    assert_eq!(system["role"], "system");
    let text = system["content"].as_str().unwrap();
    assert!(text.starts_with("<project-notes>"), "{text}");
    assert!(
        text.contains("<project-notes>") && text.contains("not instructions"),
        "{text}"
    );
    assert!(
        text.contains(
            "\n- Tests run with cargo test --workspace.\n- Never log tokens.\n</project-notes>"
        ),
        "{text}"
    );

    // An explicit project_id wins over cwd; a project without notes injects nothing.
    let (_, lines) = app.leg(None, &json!({"messages": [{"role": "user", "content": "x"}], "project_id": "empty", "cwd": cwd})).await;
    assert_eq!(
        (lines[0]["project_id"].as_str(), lines[0]["notes"].as_u64()),
        (Some("empty"), Some(0))
    );
    let system = &fake.requests()[1]["messages"][0];
    assert_ne!(
        system["role"], "system",
        "no notes and no client system prompt: no system message"
    );
}

#[tokio::test]
async fn a_leg_takes_one_quota_unit_and_a_400_takes_none() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 3).await;
    let token = app.user("q@example.com").await;
    let (status, _) = app.leg(Some(&token), &user_says("hi")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body(app.me(Some(&token)).await).await["used"], 1);

    let bad_legs = [
        json!({"messages": []}),
        json!({"messages": [{"role": "wizard", "content": "x"}]}),
        json!({"messages": [{"role": "user", "content": 5}]}),
        json!({"messages": [{"role": "user"}]}),
        json!({"messages": [{"role": "user", "content": [{"type": "image", "text": "x"}]}]}),
        json!({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "r"}]}),
        json!({"messages": [{"role": "user", "content": "x"}], "tool_role": "admin"}),
        json!({"messages": [{"role": "user", "content": "x"}], "temperature": 9}),
        json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "bad name!", "parameters": {}}]}),
        json!({"messages": [{"role": "user", "content": "x"}], "project_id": "no spaces allowed"}),
        json!({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "name": "grep", "arguments": "{not json"}]}]}),
        json!({"messages": "hello"}),
    ];
    for leg in &bad_legs {
        let r = app.post("/v1/agent/stream", Some(&token), leg).await;
        expect_error(r, 400, "invalid_request").await;
    }
    let r = app
        .post(
            "/v1/agent/stream",
            Some(&token),
            &json!({"messages": [{"role": "user", "content": "x"}], "model": "gpt-99"}),
        )
        .await;
    let b = expect_error(r, 400, "unknown_model").await;
    assert!(
        b["message"].as_str().unwrap().contains("m1"),
        "lists the models: {b}"
    );
    assert_eq!(
        body(app.me(Some(&token)).await).await["used"],
        1,
        "no 400 took a unit"
    );
    assert_eq!(fake.requests().len(), 1, "no 400 reached the provider");
}

#[tokio::test]
async fn legs_past_the_limit_are_403_quota_exceeded_before_any_stream() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 1).await;
    let token = app.user("q@example.com").await;
    assert_eq!(
        app.leg(Some(&token), &user_says("one")).await.0,
        StatusCode::OK
    );
    let r = app
        .post("/v1/agent/stream", Some(&token), &user_says("two"))
        .await;
    assert_eq!(r.headers()["content-type"], "application/json");
    expect_error(r, 403, "quota_exceeded").await;
    let me = body(app.me(Some(&token)).await).await;
    assert_eq!(
        (me["used"].as_i64(), me["remaining"].as_i64()),
        (Some(1), Some(0))
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn twenty_concurrent_legs_with_five_units_left_admit_exactly_five() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 5).await;
    let token = app.user("burst@example.com").await;
    let bodies = (0..20).map(|i| user_says(&format!("leg {i}"))).collect();
    let mut ok = 0;
    let mut refused = 0;
    for (status, text) in app.concurrent_legs(&token, bodies).await {
        match status {
            StatusCode::OK => ok += 1,
            StatusCode::FORBIDDEN => {
                assert!(text.contains("quota_exceeded"));
                refused += 1;
            }
            other => panic!("unexpected {other}: {text}"),
        }
    }
    assert_eq!((ok, refused), (5, 15));
    assert_eq!(body(app.me(Some(&token)).await).await["used"], 5);
    assert_eq!(fake.requests().len(), 5);
}

#[tokio::test]
async fn admins_are_unlimited() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 0).await;
    let token = app.user("boss@example.com").await;
    expect_error(
        app.post("/v1/agent/stream", Some(&token), &user_says("x"))
            .await,
        403,
        "quota_exceeded",
    )
    .await;
    app.state
        .auth()
        .unwrap()
        .update_user(
            "boss@example.com",
            relay_server::store::UserChanges {
                role: Some(relay_server::domain::Role::Admin),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            app.leg(Some(&token), &user_says("x")).await.0,
            StatusCode::OK
        );
    }
    assert_eq!(body(app.me(Some(&token)).await).await["remaining"], -1);
}

#[tokio::test]
async fn open_mode_counts_legs_for_me_without_limiting_them() {
    let fake = FakeUpstream::start().await;
    let app = open_app(&fake).await;
    for _ in 0..3 {
        assert_eq!(app.leg(None, &user_says("x")).await.0, StatusCode::OK);
    }
    let me = body(app.me(None).await).await;
    assert_eq!(
        (
            me["used"].as_i64(),
            me["limit"].as_i64(),
            me["remaining"].as_i64()
        ),
        (Some(3), Some(-1), Some(-1))
    );
}

#[tokio::test]
async fn legs_are_rate_limited_per_caller() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = with_fake(auth_config(dir), &fake);
        c.limits.agent_burst = 2;
        c.limits.agent_per_minute = 1;
        c
    })
    .await;
    let a = app.user("a@example.com").await;
    let b = app.user("b@example.com").await;
    for _ in 0..2 {
        assert_eq!(app.leg(Some(&a), &user_says("x")).await.0, StatusCode::OK);
    }
    let r = app
        .post("/v1/agent/stream", Some(&a), &user_says("x"))
        .await;
    assert!(
        r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    expect_error(r, 429, "rate_limited").await;
    assert_eq!(
        app.leg(Some(&b), &user_says("x")).await.0,
        StatusCode::OK,
        "b has its own budget"
    );
    assert_eq!(
        body(app.me(Some(&a)).await).await["used"],
        2,
        "the refused leg took no unit"
    );
}

#[tokio::test]
async fn tools_endpoint_lists_the_canonical_catalogue_per_role() {
    let app = TestApp::open().await;
    let r = app.get("/v1/tools", None).await;
    let tools = body(r).await["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 10);
    assert_eq!(tools[0]["name"], "read_file");
    assert!(
        tools[0]["description"]
            .as_str()
            .unwrap()
            .contains("offset to resume")
    );
    let worker = body(app.get("/v1/tools?tool_role=worker", None).await).await;
    assert_eq!(worker["tools"].as_array().unwrap().len(), 12);
    let agent = body(
        app.get("/v1/tools?tool_role=agent_orchestrator", None)
            .await,
    )
    .await;
    let names: Vec<&str> = agent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"spawn_agent") && !names.contains(&"write_file"));
    expect_error(
        app.get("/v1/tools?tool_role=root", None).await,
        400,
        "invalid_request",
    )
    .await;
}

#[tokio::test]
async fn the_demo_provider_does_a_whole_round_trip_offline() {
    // No providers configured and no keys: the demo provider serves every leg.
    let app = TestApp::open().await;
    let tools = json!([tool("list_dir"), tool("read_file")]);
    let mut leg =
        json!({"messages": [{"role": "user", "content": "what is here?"}], "tools": tools});
    let (_, lines) = app.leg(None, &leg).await;
    assert_eq!(lines[0]["model"], "demo");
    let calls = assert_one_terminal(&lines)["calls"].clone();
    assert_eq!(
        calls,
        json!([{"id": "demo_call_1", "name": "list_dir", "arguments": "{\"path\":\".\"}"}])
    );
    let msgs = leg["messages"].as_array_mut().unwrap();
    msgs.push(json!({"role": "assistant", "tool_calls": calls}));
    msgs.push(
        json!({"role": "tool", "tool_call_id": "demo_call_1", "content": "Cargo.toml\nsrc\n"}),
    );
    let (_, lines) = app.leg(None, &leg).await;
    assert_eq!(assert_one_terminal(&lines)["event"], "done");
    let text: String = lines
        .iter()
        .filter(|l| l["event"] == "text")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert!(text.contains("Cargo.toml"), "{text}");
    assert!(
        lines.iter().filter(|l| l["event"] == "text").count() > 3,
        "streamed word by word"
    );
    // Without tools it answers in words.
    let (_, lines) = app.leg(None, &user_says("hello")).await;
    assert_eq!(events(&lines)[1], "text");
    assert_eq!(assert_one_terminal(&lines)["finish_reason"], "stop");
}
