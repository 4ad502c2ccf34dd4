//! The compatible endpoints' generation controls reach every kind of provider in its own form:
//! `tool_choice`, `stop`/`stop_sequences`, `temperature` and the token limit; and a browser's
//! preflight may send the headers those endpoints read.

use std::sync::{Arc, Mutex};

use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, body, open_config};

/// An upstream that records every request body and refuses it, which is all these tests need:
/// the body a provider would have received.
struct Capture {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Capture {
    async fn start() -> Self {
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        let app = axum::Router::new().fallback(move |b: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&b).unwrap_or(Value::Null));
                (
                    axum::http::StatusCode::BAD_REQUEST,
                    axum::Json(json!({"error": {"type": "invalid_request_error"}})),
                )
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url: format!("http://{addr}"),
            bodies,
        }
    }

    fn last(&self) -> Value {
        self.bodies.lock().unwrap().last().cloned().unwrap()
    }
}

const KINDS: [(&str, ProviderKind); 4] = [
    ("openai", ProviderKind::Openai),
    ("anthropic", ProviderKind::Anthropic),
    ("gemini", ProviderKind::Gemini),
    ("responses", ProviderKind::OpenaiResponses),
];

/// One model per provider kind, each named after its kind, all sending to `capture`.
async fn app(capture: &Capture) -> TestApp {
    let url = capture.url.clone();
    TestApp::spawn_with(move |dir| {
        let mut c = open_config(dir);
        for (name, kind) in KINDS {
            c.providers.push(ProviderConfig {
                base_url: Some(url.clone()),
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

fn grep_tool() -> Value {
    json!({"type": "object", "properties": {"p": {"type": "string"}}})
}

/// Sends an OpenAI request to `model` and returns what its provider received.
async fn via_openai(app: &TestApp, capture: &Capture, model: &str, extra: Value) -> Value {
    let mut req = json!({"model": model, "messages": [{"role": "user", "content": "find x"}],
        "tools": [{"type": "function", "function": {"name": "grep", "parameters": grep_tool()}}]});
    req.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let before = capture.bodies.lock().unwrap().len();
    app.post("/v1/chat/completions", None, &req).await;
    assert_eq!(capture.bodies.lock().unwrap().len(), before + 1, "{model}");
    capture.last()
}

/// Sends an Anthropic request to `model` and returns what its provider received.
async fn via_anthropic(app: &TestApp, capture: &Capture, model: &str, extra: Value) -> Value {
    let mut req = json!({"model": model, "max_tokens": 20,
        "messages": [{"role": "user", "content": "find x"}],
        "tools": [{"name": "grep", "input_schema": grep_tool()}]});
    req.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let before = capture.bodies.lock().unwrap().len();
    app.post("/v1/messages", None, &req).await;
    assert_eq!(capture.bodies.lock().unwrap().len(), before + 1, "{model}");
    capture.last()
}

/// Through whichever API `extra` speaks (`stop` is OpenAI's).
async fn via(app: &TestApp, capture: &Capture, model: &str, extra: &Value) -> Value {
    if extra.get("stop").is_some() {
        via_openai(app, capture, model, extra.clone()).await
    } else {
        via_anthropic(app, capture, model, extra.clone()).await
    }
}

/// Where each provider kind keeps the tool choice in its request.
fn choice_of(kind: &str, sent: &Value) -> Value {
    match kind {
        "gemini" => sent["toolConfig"]["functionCallingConfig"].clone(),
        _ => sent["tool_choice"].clone(),
    }
}

#[tokio::test]
async fn openai_tool_choices_reach_each_provider_in_its_own_form() {
    let capture = Capture::start().await;
    let app = app(&capture).await;
    let named = json!({"type": "function", "function": {"name": "grep"}});
    // (the OpenAI choice, then what openai, anthropic, gemini and responses receive)
    let cases = [
        (
            json!("auto"),
            [
                "auto".into(),
                json!({"type": "auto"}),
                json!({"mode": "AUTO"}),
                "auto".into(),
            ],
        ),
        (
            json!("none"),
            [
                "none".into(),
                json!({"type": "none"}),
                json!({"mode": "NONE"}),
                "none".into(),
            ],
        ),
        (
            json!("required"),
            [
                "required".into(),
                json!({"type": "any"}),
                json!({"mode": "ANY"}),
                "required".into(),
            ],
        ),
        (
            named.clone(),
            [
                named,
                json!({"type": "tool", "name": "grep"}),
                json!({"mode": "ANY", "allowedFunctionNames": ["grep"]}),
                json!({"type": "function", "name": "grep"}),
            ],
        ),
    ];
    for (choice, expected) in cases {
        for ((kind, _), want) in KINDS.iter().zip(expected) {
            let sent = via_openai(&app, &capture, kind, json!({"tool_choice": choice})).await;
            assert_eq!(
                choice_of(kind, &sent),
                want,
                "{kind} given {choice}: {sent}"
            );
        }
    }
    // With `none` the tools still go, so the calls in the history stay described.
    let sent = via_openai(&app, &capture, "anthropic", json!({"tool_choice": "none"})).await;
    assert_eq!(sent["tools"][0]["name"], "grep");
    // No choice given: none sent, the provider's default stands.
    let sent = via_openai(&app, &capture, "openai", json!({})).await;
    assert!(sent.get("tool_choice").is_none(), "{sent}");
}

#[tokio::test]
async fn anthropic_tool_choices_reach_each_provider_in_its_own_form() {
    let capture = Capture::start().await;
    let app = app(&capture).await;
    let cases = [
        (
            json!({"type": "auto"}),
            [
                "auto".into(),
                json!({"type": "auto"}),
                json!({"mode": "AUTO"}),
                "auto".into(),
            ],
        ),
        (
            json!({"type": "none"}),
            [
                "none".into(),
                json!({"type": "none"}),
                json!({"mode": "NONE"}),
                "none".into(),
            ],
        ),
        (
            json!({"type": "any"}),
            [
                "required".into(),
                json!({"type": "any"}),
                json!({"mode": "ANY"}),
                "required".into(),
            ],
        ),
        (
            json!({"type": "tool", "name": "grep"}),
            [
                json!({"type": "function", "function": {"name": "grep"}}),
                json!({"type": "tool", "name": "grep"}),
                json!({"mode": "ANY", "allowedFunctionNames": ["grep"]}),
                json!({"type": "function", "name": "grep"}),
            ],
        ),
    ];
    for (choice, expected) in cases {
        for ((kind, _), want) in KINDS.iter().zip(expected) {
            let sent = via_anthropic(&app, &capture, kind, json!({"tool_choice": choice})).await;
            assert_eq!(
                choice_of(kind, &sent),
                want,
                "{kind} given {choice}: {sent}"
            );
        }
    }
}

#[tokio::test]
async fn stop_temperature_and_token_limit_reach_each_provider() {
    let capture = Capture::start().await;
    let app = app(&capture).await;
    let openai = json!({"stop": "END", "temperature": 0.25, "max_tokens": 20});
    let anthropic = json!({"stop_sequences": ["END"], "temperature": 0.25});
    for extra in [openai, anthropic] {
        let sent = via(&app, &capture, "openai", &extra).await;
        // A Chat Completions client reaches an `openai` provider in its own form (`"END"`);
        // from another door the stop sequences arrive as Relay's list.
        let stop = extra.get("stop").cloned().unwrap_or_else(|| json!(["END"]));
        assert_eq!(
            (&sent["stop"], &sent["temperature"], &sent["max_tokens"]),
            (&stop, &json!(0.25), &json!(20)),
            "{sent}"
        );
        let sent = via(&app, &capture, "anthropic", &extra).await;
        assert_eq!(
            (
                &sent["stop_sequences"],
                &sent["temperature"],
                &sent["max_tokens"]
            ),
            (&json!(["END"]), &json!(0.25), &json!(20)),
            "{sent}"
        );
        let sent = via(&app, &capture, "gemini", &extra).await;
        assert_eq!(
            sent["generationConfig"],
            json!({"stopSequences": ["END"], "temperature": 0.25, "maxOutputTokens": 20}),
            "{sent}"
        );
        // The Responses API has no stop sequences: they are dropped there.
        let sent = via(&app, &capture, "responses", &extra).await;
        assert_eq!(
            (&sent["temperature"], &sent["max_output_tokens"]),
            (&json!(0.25), &json!(20)),
            "{sent}"
        );
        assert!(sent.get("stop").is_none(), "{sent}");
    }
    // No stop given, none sent.
    let sent = via_openai(&app, &capture, "openai", json!({})).await;
    assert!(sent.get("stop").is_none(), "{sent}");
}

#[tokio::test]
async fn malformed_tool_choice_and_stop_are_refused_in_each_apis_shape() {
    let capture = Capture::start().await;
    let app = app(&capture).await;
    for extra in [
        json!({"tool_choice": "sometimes"}),
        json!({"tool_choice": {"type": "function"}}),
        json!({"stop": ["a", "b", "c", "d", "e"]}),
        json!({"stop": 7}),
    ] {
        let mut req = json!({"model": "openai", "messages": [{"role": "user", "content": "x"}]});
        req.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let r = app.post("/v1/chat/completions", None, &req).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{extra}");
        assert_eq!(body(r).await["error"]["type"], "invalid_request_error");
    }
    for choice in [json!({"type": "tool"}), json!({"type": "sometimes"})] {
        let req = json!({"model": "anthropic", "max_tokens": 5, "tool_choice": choice,
            "messages": [{"role": "user", "content": "x"}]});
        let r = app.post("/v1/messages", None, &req).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{choice}");
        let b = body(r).await;
        assert_eq!(
            (b["type"].as_str(), b["error"]["type"].as_str()),
            (Some("error"), Some("invalid_request_error"))
        );
    }
    assert!(
        capture.bodies.lock().unwrap().is_empty(),
        "nothing went upstream"
    );
}

#[tokio::test]
async fn a_browser_preflight_may_send_the_compatible_endpoints_headers() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.cors.allow_origins = vec!["https://app.example".into()];
        c
    })
    .await;
    let asked = "authorization,content-type,x-api-key,anthropic-version,x-relay-project,x-relay-cwd,x-relay-git-remote";
    let r = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/v1/messages"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", asked)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let allowed = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for h in asked.split(',') {
        assert!(allowed.contains(h), "{h} not in {allowed}");
    }
}
