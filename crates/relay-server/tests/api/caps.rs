//! Caps an operator sets per account (issue 40): the models an account may use on every door and
//! in the model lists, a monthly spend budget that admission reserves against, the usage-limit
//! headers and 429 `billing_error` of the Messages door, `GET /api/oauth/usage`, and the OTLP
//! telemetry agents post. On either store.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent::{user_says, with_fake};
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::{TestApp, auth_config, body, expect_error};

/// A reply that reports `input` prompt tokens and `output` completion tokens.
fn reply(input: u64, output: u64) -> Reply {
    Reply::Sse {
        chunks: vec![
            up::text_chunk("ok"),
            up::finish("stop"),
            up::usage(input, output),
            up::DONE.into(),
        ],
        pause: Duration::ZERO,
    }
}

/// An app with the fake's two models (m1 priced at $2 in / $10 out per million tokens), an admin
/// (`root`) and a user (`ann`); their tokens.
async fn app_with_accounts(
    fake: &FakeUpstream,
    edit: impl FnOnce(&mut relay_server::config::Config),
) -> (TestApp, String, String) {
    let app = TestApp::spawn_with(|dir| {
        let mut c = with_fake(auth_config(dir), fake);
        c.models[0].input_price = Some(2.0);
        c.models[0].output_price = Some(10.0);
        c.limits.agent_burst = 1_000;
        c.usage.flush_ms = 5;
        edit(&mut c);
        c
    })
    .await;
    let root = app.user("root@example.com").await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        "root@example.com",
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    let ann = app.user("ann@example.com").await;
    (app, root, ann)
}

impl TestApp {
    async fn patch_user(&self, admin: &str, email: &str, patch: &Value) -> reqwest::Response {
        self.client
            .patch(self.url(&format!("/v1/admin/users/{email}")))
            .bearer_auth(admin)
            .json(patch)
            .send()
            .await
            .unwrap()
    }

    async fn messages(&self, token: &str, model: &str) -> reqwest::Response {
        self.client
            .post(self.url("/v1/messages"))
            .bearer_auth(token)
            .header("anthropic-version", "2023-06-01")
            .json(&json!({"model": model, "max_tokens": 100,
                "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap()
    }
}

fn ids(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_allowlist_limits_every_door_and_the_model_lists_and_auto_skips_the_rest() {
    let fake = FakeUpstream::start().await;
    let (app, root, ann) = app_with_accounts(&fake, |_| {}).await;
    let r = app
        .patch_user(
            &root,
            "ann@example.com",
            &json!({"allowed_models": ["m1", "nope"]}),
        )
        .await;
    let b = expect_error(r, 400, "invalid_request").await;
    assert!(b["message"].as_str().unwrap().contains("`nope`"), "{b}");
    let r = app
        .patch_user(&root, "ann@example.com", &json!({"allowed_models": ["m2"]}))
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(r).await["user"]["allowed_models"], json!(["m2"]));
    assert_eq!(
        body(app.me(Some(&ann)).await).await["allowed_models"],
        json!(["m2"])
    );

    // Both list shapes, and one model, show only what the account may use.
    assert_eq!(
        ids(&body(app.get("/v1/models", Some(&ann)).await).await),
        ["auto", "m2"]
    );
    let anthropic = app
        .client
        .get(app.url("/v1/models"))
        .bearer_auth(&ann)
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap();
    assert_eq!(ids(&body(anthropic).await), ["auto", "m2"]);
    assert_eq!(app.get("/v1/models/m1", Some(&ann)).await.status(), 404);
    assert_eq!(
        ids(&body(app.get("/v1/models", Some(&root)).await).await),
        ["auto", "m1", "m2"]
    );

    // A denied model: 403 on the native leg, 400 naming it on each compatible door; the
    // provider sees nothing.
    let mut leg = user_says("hi");
    leg["model"] = json!("m1");
    let (status, lines) = app.leg(Some(&ann), &leg).await;
    assert_eq!(
        (status, &lines[0]["error"]),
        (StatusCode::FORBIDDEN, &json!("model_not_allowed"))
    );
    let r = app.messages(&ann, "m1").await;
    assert_eq!(r.status(), 400);
    let b = body(r).await;
    assert_eq!(b["error"]["type"], "invalid_request_error");
    assert!(
        b["error"]["message"].as_str().unwrap().contains("`m1`"),
        "{b}"
    );
    let chat = json!({"model": "m1", "messages": [{"role": "user", "content": "x"}]});
    let b = body(app.post("/v1/chat/completions", Some(&ann), &chat).await).await;
    assert_eq!(
        (&b["error"]["type"], &b["error"]["code"]),
        (&json!("invalid_request_error"), &json!("model_not_allowed"))
    );
    let responses = json!({"model": "m1", "input": "x"});
    let r = app.post("/v1/responses", Some(&ann), &responses).await;
    assert_eq!(r.status(), 400);
    assert_eq!(body(r).await["error"]["code"], "model_not_allowed");
    assert!(
        fake.requests().is_empty(),
        "no denied call reached the provider"
    );

    // `auto` (m1 first) skips m1 and answers from m2.
    fake.push("up-2", reply(5, 1));
    let (status, _) = app.leg(Some(&ann), &user_says("auto")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fake.requests()[0]["model"], "up-2");

    // null: every model again.
    let r = app
        .patch_user(&root, "ann@example.com", &json!({"allowed_models": null}))
        .await;
    assert_eq!(body(r).await["user"]["allowed_models"], Value::Null);
    fake.push("up-1", reply(5, 1));
    assert_eq!(app.leg(Some(&ann), &leg).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_spend_budget_clamps_the_output_to_what_is_left_and_refuses_once_spent() {
    let fake = FakeUpstream::start().await;
    let (app, root, ann) = app_with_accounts(&fake, |_| {}).await;
    let r = app
        .patch_user(&root, "ann@example.com", &json!({"spend_budget_usd": -3}))
        .await;
    expect_error(r, 400, "invalid_request").await;
    let r = app
        .patch_user(
            &root,
            "ann@example.com",
            &json!({"spend_budget_usd": 0.001}),
        )
        .await;
    assert_eq!(body(r).await["user"]["spend_budget_usd"], 0.001);

    // 90 in, 20 out on m1: $0.00038.
    let mut leg = user_says("a");
    leg["model"] = json!("m1");
    fake.push("up-1", reply(90, 20));
    assert_eq!(app.leg(Some(&ann), &leg).await.0, StatusCode::OK);
    app.settled_legs(Some(&ann), 1).await;
    let me = body(app.me(Some(&ann)).await).await;
    let spent = me["spend_used_usd"].as_f64().unwrap();
    assert!((spent - 0.00038).abs() < 1e-9, "{me}");
    assert_eq!(me["spend_budget_usd"], 0.001);

    // $0.00062 left: the next call's output is clamped to what that buys at $10 a million
    // (at most 62 tokens, less its prompt).
    fake.push("up-1", reply(100, 100));
    assert_eq!(app.leg(Some(&ann), &leg).await.0, StatusCode::OK);
    let asked = &fake.requests()[1];
    let cap = asked["max_completion_tokens"]
        .as_u64()
        .or_else(|| asked["max_tokens"].as_u64())
        .unwrap_or_else(|| panic!("no output cap upstream: {asked}"));
    assert!(cap <= 62, "output capped at {cap}");
    app.settled_legs(Some(&ann), 2).await;

    // Spent past the budget ($0.00158): refused before the provider, on every door.
    let before = fake.requests().len();
    let (status, lines) = app.leg(Some(&ann), &leg).await;
    assert_eq!(
        (status, &lines[0]["error"]),
        (StatusCode::FORBIDDEN, &json!("budget_exceeded"))
    );
    assert!(
        lines[0]["message"]
            .as_str()
            .unwrap()
            .contains("spend budget"),
        "{}",
        lines[0]
    );
    let chat = json!({"model": "m1", "messages": [{"role": "user", "content": "x"}]});
    let r = app.post("/v1/chat/completions", Some(&ann), &chat).await;
    assert_eq!(r.status(), 403);
    let r = app.messages(&ann, "m1").await;
    assert_eq!(r.status(), 429);
    assert_eq!(body(r).await["error"]["type"], "billing_error");
    assert_eq!(
        fake.requests().len(),
        before,
        "the provider saw none of them"
    );

    // The operator's list and an unpriced model: spend does not grow on it.
    let users = body(app.get("/v1/admin/users?q=ann", Some(&root)).await).await;
    assert!((users["items"][0]["spend_used_usd"].as_f64().unwrap() - 0.00158).abs() < 1e-9);
}

#[tokio::test]
async fn concurrent_calls_reserve_spend_and_together_stay_within_the_budget() {
    let fake = FakeUpstream::start().await;
    let (app, root, ann) = app_with_accounts(&fake, |_| {}).await;
    // $0.025: 1,000 output tokens cost $0.01.
    let r = app
        .patch_user(
            &root,
            "ann@example.com",
            &json!({"spend_budget_usd": 0.025}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    for _ in 0..8 {
        fake.push(
            "up-1",
            Reply::Sse {
                chunks: vec![
                    up::text_chunk("ok"),
                    up::finish("stop"),
                    up::usage(10, 10),
                    up::DONE.into(),
                ],
                // Long enough that every call is admitted or refused before any ends.
                pause: Duration::from_millis(1_500),
            },
        );
    }
    let legs: Vec<Value> = (0..8)
        .map(|_| {
            let mut leg = user_says("x");
            leg["model"] = json!("m1");
            leg["max_tokens"] = json!(1_000);
            leg
        })
        .collect();
    let results = app.concurrent_legs(&ann, legs).await;
    let admitted = results.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    let refused = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::FORBIDDEN)
        .count();
    assert_eq!(admitted + refused, 8, "{results:?}");
    assert!(refused >= 1, "not all eight calls fit $0.025: {results:?}");
    // What the admitted calls could spend on output together (all running at once) stays
    // within the budget.
    let output_caps: u64 = fake
        .requests()
        .iter()
        .map(|r| {
            r["max_completion_tokens"]
                .as_u64()
                .or_else(|| r["max_tokens"].as_u64())
                .unwrap()
        })
        .sum();
    assert!(
        output_caps as f64 * 10.0 / 1e6 <= 0.025,
        "output caps {output_caps}"
    );
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test]
async fn messages_answers_carry_the_fullest_caps_standing_and_a_reached_cap_is_a_billing_error() {
    let fake = FakeUpstream::start().await;
    let (app, root, ann) = app_with_accounts(&fake, |_| {}).await;
    let r = app
        .patch_user(&root, "ann@example.com", &json!({"limit": 4}))
        .await;
    assert_eq!(r.status(), StatusCode::OK);

    // 1 of 4 units: allowed, no threshold; the reset is the next month's start.
    fake.push("up-2", reply(3, 1));
    let r = app.messages(&ann, "m2").await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-status"),
        Some("allowed")
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-representative-claim"),
        Some("overage")
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-overage-status"),
        Some("allowed")
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-overage-utilization"),
        Some("0.25")
    );
    assert_eq!(
        header(
            &r,
            "anthropic-ratelimit-unified-overage-surpassed-threshold"
        ),
        None
    );
    let reset: i64 = header(&r, "anthropic-ratelimit-unified-reset")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-overage-reset"),
        Some(reset.to_string().as_str())
    );
    let now = relay_server::clock::now() as i64;
    assert_eq!(reset, relay_server::usage::period::next_month_start(now));
    drop(r);
    for _ in 0..2 {
        fake.push("up-2", reply(3, 1));
        drop(app.messages(&ann, "m2").await);
    }
    // 3 of 4: past 75 %.
    // (the third call above) — ask the usage endpoint, then the fourth call passes 95 %.
    let usage = app.get("/api/oauth/usage", Some(&ann)).await;
    assert_eq!(header(&usage, "cache-control"), Some("no-store"));
    let usage = body(usage).await;
    assert_eq!(usage["limits"][0]["kind"], "units");
    assert_eq!(usage["limits"][0]["percent"], 75);
    assert_eq!(usage["limits"][0]["is_active"], true);
    assert_eq!(
        usage["limits"][0]["resets_at"],
        relay_server::usage::caps::iso_millis(reset)
    );
    assert_eq!(usage["extra_usage"]["currency"], "USD");
    fake.push("up-2", reply(3, 1));
    let r = app.messages(&ann, "m2").await;
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-status"),
        Some("allowed_warning")
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-overage-utilization"),
        Some("0.99")
    );
    assert_eq!(
        header(
            &r,
            "anthropic-ratelimit-unified-overage-surpassed-threshold"
        ),
        Some("0.95")
    );
    drop(r);

    // The fifth: 429 billing_error before the provider, in the reference's shape.
    let before = fake.requests().len();
    let r = app.messages(&ann, "m2").await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "x-should-retry"), Some("false"));
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-status"),
        Some("rejected")
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-overage-utilization"),
        Some("1")
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-overage-period"),
        Some("monthly")
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-reset"),
        Some(reset.to_string().as_str())
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-representative-claim"),
        None
    );
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-overage-status"),
        None
    );
    let retry: i64 = header(&r, "retry-after").unwrap().parse().unwrap();
    assert!((retry - (reset - now)).abs() <= 5, "retry-after {retry}");
    let b = body(r).await;
    assert_eq!(b["type"], "error");
    assert_eq!(b["error"]["type"], "billing_error");
    let message = b["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("resets") && message.contains("operator"),
        "{message}"
    );
    assert_eq!(fake.requests().len(), before);
    // Other routes keep their codes.
    let chat = json!({"model": "m2", "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(
        app.post("/v1/chat/completions", Some(&ann), &chat)
            .await
            .status(),
        403
    );

    // An account without a cap gets none of the headers, and its spend alone from the usage
    // endpoint.
    fake.push("up-2", reply(3, 1));
    let r = app.messages(&root, "m2").await;
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()
            .keys()
            .all(|k| !k.as_str().starts_with("anthropic-ratelimit"))
    );
    drop(r);
    let usage = body(app.get("/api/oauth/usage", Some(&root)).await).await;
    assert_eq!(usage["limits"], json!([]));
    assert_eq!(usage["extra_usage"]["monthly_limit"], Value::Null);
    assert!(
        usage["extra_usage"]["daily"]["used_credits"].is_i64(),
        "{usage}"
    );
    assert!(
        usage["extra_usage"]["weekly"]["used_credits"].is_i64(),
        "{usage}"
    );
    let r = app.get("/api/oauth/usage", Some("rly_not-a-token")).await;
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn telemetry_is_accepted_counted_and_forwarded_with_the_account() {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::metrics::v1::ResourceMetrics;
    use prost::Message;

    // A collector that records what reaches it.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, String, Vec<u8>)>();
    let collector = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let tx = tx.clone();
            async move {
                let ct = headers
                    .get("content-type")
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                let _ = tx.send((uri.path().to_owned(), ct, body.to_vec()));
                ""
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, collector).await.unwrap() });

    let fake = FakeUpstream::start().await;
    let (app, _root, ann) = app_with_accounts(&fake, |c| {
        c.telemetry.otlp_endpoint = Some(format!("http://{at}"));
    })
    .await;
    let export = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics::default()],
    };
    let post = |path: &'static str, token: Option<&str>, ct: &'static str, body: Vec<u8>| {
        let mut req = app
            .client
            .post(app.url(path))
            .header("content-type", ct)
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    let r = post(
        "/v1/metrics",
        None,
        "application/x-protobuf",
        export.encode_to_vec(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 401);
    let r = post(
        "/v1/metrics",
        Some(&ann),
        "application/x-protobuf",
        export.encode_to_vec(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let (path, ct, got) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (path.as_str(), ct.as_str()),
        ("/v1/metrics", "application/x-protobuf")
    );
    let got = ExportMetricsServiceRequest::decode(got.as_slice()).unwrap();
    let attrs = &got.resource_metrics[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes;
    assert_eq!(attrs[0].key, "enduser.id");
    assert!(format!("{:?}", attrs[0].value).contains("ann@example.com"));

    let logs = json!({"resourceLogs": [{"resource": {"attributes": []}, "scopeLogs": []}]});
    let r = post(
        "/v1/logs",
        Some(&ann),
        "application/json",
        serde_json::to_vec(&logs).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let (path, _, got) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(path, "/v1/logs");
    let got: Value = serde_json::from_slice(&got).unwrap();
    assert_eq!(
        got["resourceLogs"][0]["resource"]["attributes"][0]["value"]["stringValue"],
        "ann@example.com"
    );

    // Not OTLP: still 200 (an agent's exporter would log every flush otherwise), not forwarded.
    let r = post("/v1/traces", Some(&ann), "text/plain", b"hello".to_vec())
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Over 4 MiB: refused.
    let r = post(
        "/v1/traces",
        Some(&ann),
        "application/x-protobuf",
        vec![0; 5 * 1024 * 1024],
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 413);

    let metrics = app.get("/metrics", None).await.text().await.unwrap();
    assert!(
        metrics.contains("relay_agent_telemetry_total{signal=\"metrics\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("relay_agent_telemetry_total{signal=\"logs\"} 1"));
    assert!(metrics.contains("relay_agent_telemetry_total{signal=\"traces\"} 1"));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), rx.recv())
            .await
            .is_err(),
        "the plain-text body was not forwarded"
    );
}
