//! The leg service driven without HTTP: real SQLite stores in a temporary directory, the demo
//! provider, and a provider that cannot be reached (a closed port) for the failing model.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use relay_wire::ErrorCode;
use relay_wire::agent::{AgentEvent, AgentRequest, Content, Message, MessageRole};

use super::{Deps, LegEvent, Legs, validate};
use crate::accounts::Caller;
use crate::config::{AuthConfig, Config, MemoryConfig, ModelConfig, ProviderConfig, ProviderKind};
use crate::domain::Role;
use crate::limits::CallerLimit;
use crate::metrics::registry::Metrics;
use crate::providers::registry::Models;
use crate::store::{NewUser, Stores, User};
use crate::usage::{Ledger, PriceList};

struct NoEnv;

impl crate::config::Env for NoEnv {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

/// A port nothing listens on: a model behind it fails before any output.
async fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

struct Fixture {
    legs: Legs,
    stores: Stores,
    _dir: tempfile::TempDir,
}

/// `auto` is `down` (unreachable) then `demo`; accounts on, in one SQLite file.
async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("relay.db").display());
    let port = closed_port().await;
    let mut config = Config {
        memory: MemoryConfig {
            url: url.clone(),
            ..MemoryConfig::default()
        },
        auth: Some(AuthConfig {
            url,
            argon2_memory_kib: 256,
            argon2_iterations: 1,
            ..AuthConfig::default()
        }),
        ..Config::default()
    };
    config.providers = vec![
        ProviderConfig {
            base_url: Some(format!("http://127.0.0.1:{port}/v1")),
            ..ProviderConfig::new("down", ProviderKind::Openai)
        },
        ProviderConfig::new("demo", ProviderKind::Demo),
    ];
    config.models = vec![
        ModelConfig {
            name: "down".into(),
            provider: "down".into(),
            upstream: "x".into(),
            ..Default::default()
        },
        ModelConfig {
            name: "demo".into(),
            provider: "demo".into(),
            upstream: "demo".into(),
            ..Default::default()
        },
    ];
    config.routing.auto = vec!["down".into(), "demo".into()];
    config.routing.retries = 0;
    let stores = Stores::open(&config).await.unwrap();
    let metrics = Metrics::new();
    let ledger = Ledger::start(
        stores.memory.usage.clone(),
        &config.usage,
        PriceList::from_models(&config.models),
        metrics.clone(),
    );
    let legs = Legs::new(Deps {
        routing: config.routing.clone(),
        memory_config: config.memory.clone(),
        drain: Duration::from_millis(config.usage.drain_ms),
        budget_defaults: Some(crate::usage::budget::Defaults {
            tokens: -1,
            spend_usd: -1.0,
        }),
        models: Models::from_config(&config, &NoEnv).unwrap(),
        metrics,
        ledger,
        rate_limit: Arc::new(CallerLimit::new(600, 100)),
        memory: stores.memory.memory.clone(),
        auth: stores.auth.clone(),
        clock: Arc::new(crate::clock::Clock::default()),
        quota_month: Arc::new(crate::usage::period::QuotaMonth::new(
            config
                .auth
                .as_ref()
                .map_or(crate::config::QuotaPeriod::Never, |a| a.quota_period),
        )),
    });
    Fixture {
        legs,
        stores,
        _dir: dir,
    }
}

impl Fixture {
    async fn user(&self, limit: i64) -> User {
        let auth = self.stores.auth.as_ref().unwrap();
        auth.create_user(NewUser {
            id: "u1".into(),
            email: crate::domain::Email::parse("a@example.com").unwrap(),
            password_hash: "x".into(),
            role: Role::User,
            limit,
            created_at: 0.0,
        })
        .await
        .unwrap()
    }

    async fn used(&self) -> i64 {
        let auth = self.stores.auth.as_ref().unwrap();
        let (user, _) = auth.user_by_email("a@example.com").await.unwrap().unwrap();
        user.used
    }
}

fn says(text: &str) -> AgentRequest {
    AgentRequest {
        messages: vec![Message {
            role: MessageRole::User,
            content: Some(Content::Text(text.into())),
            tool_calls: None,
            tool_call_id: None,
        }],
        tools: Vec::new(),
        tool_role: None,
        model: None,
        project_id: None,
        project: None,
        cwd: None,
        git_remote: None,
        root: None,
        max_tokens: None,
        temperature: None,
    }
}

async fn wire_events(opened: super::Opened) -> Vec<AgentEvent> {
    opened
        .events
        .filter_map(|e| async move {
            match e {
                LegEvent::Wire(e) => Some(e),
                LegEvent::Raw(_) => None,
            }
        })
        .collect()
        .await
}

#[tokio::test]
async fn a_leg_falls_back_past_an_unreachable_model_and_takes_one_unit() {
    let f = fixture().await;
    let caller = Caller::User(f.user(5).await);
    let leg = validate(says("hello")).unwrap();
    let opened = f
        .legs
        .open(&caller, "r1".into(), Some("auto"), leg, Instant::now())
        .await
        .unwrap();
    assert_eq!(
        opened.model, "demo",
        "the second model of the chain answered"
    );
    assert!(
        !opened.raw,
        "a native leg never gets a provider's own bytes"
    );
    let events = wire_events(opened).await;
    assert!(matches!(events.first(), Some(AgentEvent::Start { model, .. }) if model == "demo"));
    assert!(
        matches!(events.last(), Some(AgentEvent::Done { .. })),
        "{events:?}"
    );
    assert_eq!(f.used().await, 1);
}

#[tokio::test]
async fn a_leg_no_model_answers_costs_nothing() {
    let f = fixture().await;
    let caller = Caller::User(f.user(5).await);
    let leg = validate(says("hello")).unwrap();
    let err = f
        .legs
        .open(&caller, "r2".into(), Some("down"), leg, Instant::now())
        .await
        .err()
        .unwrap();
    assert_eq!(err.code, ErrorCode::ProviderUnavailable);
    assert_eq!(f.used().await, 0, "the unit was given back");
}

#[tokio::test]
async fn a_spent_quota_is_refused_before_any_model_and_stopping_ends_an_open_leg() {
    let f = fixture().await;
    let caller = Caller::User(f.user(1).await);
    let opened = f
        .legs
        .open(
            &caller,
            "r3".into(),
            Some("demo"),
            validate(says("first")).unwrap(),
            Instant::now(),
        )
        .await
        .unwrap();
    let err = f
        .legs
        .open(
            &caller,
            "r4".into(),
            Some("demo"),
            validate(says("second")).unwrap(),
            Instant::now(),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(err.code, ErrorCode::QuotaExceeded);
    // The open leg ends at the service's stop, after what was already queued (its start and
    // first output), with the error that tells the client to retry elsewhere.
    f.legs.stop();
    let events = wire_events(opened).await;
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::Error {
                error: ErrorCode::ProviderUnavailable,
                retryable: true,
                ..
            })
        ),
        "{events:?}"
    );
    assert_eq!(events.len(), 3, "{events:?}");
}

#[test]
fn a_door_leg_is_validated_once_with_what_it_carries_and_names_its_door() {
    use super::{DoorCall, DoorLeg, validate_door};
    use crate::domain::{Door, ProjectId};
    use crate::providers::ToolChoice;
    use crate::providers::passthrough::Passthrough;

    let tool = relay_wire::tools::ToolDef {
        name: "get_weather".into(),
        description: "weather".into(),
        parameters: serde_json::json!({"type": "object"}),
    };
    let door_leg = |tools: Vec<relay_wire::tools::ToolDef>| DoorLeg {
        conversation: says("hello"),
        tools,
        tool_choice: Some(ToolChoice::Auto),
        stop: vec!["END".into()],
    };
    let call = || DoorCall {
        project_id: Some(ProjectId::parse("p1").unwrap()),
        passthrough: Arc::new(Passthrough {
            door: Door::Messages,
            body: serde_json::Map::new(),
            bytes: Default::default(),
            anthropic_beta: None,
            raw: true,
        }),
        prompt_estimate: 4321,
        service_tier: Some("flex".into()),
    };
    let leg = validate_door(door_leg(vec![tool.clone()]), call()).unwrap();
    assert_eq!(leg.door(), Door::Messages);
    assert_eq!(
        leg.prompt_estimate, 4321,
        "the body's estimate, not the text's"
    );
    assert_eq!(leg.service_tier.as_deref(), Some("flex"));
    assert_eq!(leg.stop, ["END"]);
    assert_eq!(leg.tool_choice, Some(ToolChoice::Auto));
    assert_eq!(leg.tools.len(), 1);
    assert_eq!(leg.project_id.as_ref().map(ProjectId::as_str), Some("p1"));
    assert_eq!(leg.first_user_text, "hello");
    // A door's tools are held to the same rules as a native leg's.
    let bad = relay_wire::tools::ToolDef {
        name: "bad name!".into(),
        ..tool
    };
    let err = validate_door(door_leg(vec![bad]), call()).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest, "{}", err.message);
    // A native leg carries no client body and comes by the agent route.
    assert_eq!(validate(says("hello")).unwrap().door(), Door::Agent);
}
