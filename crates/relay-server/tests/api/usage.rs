//! The usage ledger (issue 35) over HTTP: records per leg on every route, the sums by day, model,
//! project and account, cost from prices, privacy, erasure and pruning; on either store.

use std::time::Duration;

use relay_server::config::Config;
use relay_server::store::usage::LegRecord;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent::{user_says, with_fake};
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::{TestApp, auth_config, body, expect_error, open_config};

/// The fake's models, with prices on m1 only, and records written at once.
fn priced(mut c: Config, fake: &FakeUpstream) -> Config {
    c = with_fake(c, fake);
    c.models[0].input_price = Some(2.0);
    c.models[0].cached_input_price = Some(0.5);
    c.models[0].output_price = Some(10.0);
    c.limits.agent_burst = 1_000;
    c.usage.flush_ms = 5;
    c
}

/// A reply that reports `input` prompt tokens of which `cached` were cached, and `output`.
fn reply(input: u64, cached: u64, output: u64) -> Reply {
    Reply::Sse {
        chunks: vec![
            up::text_chunk("ok"),
            up::finish("stop"),
            up::data(
                json!({"choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output,
                "prompt_tokens_details": {"cached_tokens": cached}}}),
            ),
            up::DONE.into(),
        ],
        pause: Duration::ZERO,
    }
}

impl TestApp {
    /// The caller's records once `n` are written (the ledger writes off the leg's path).
    pub(crate) async fn settled_legs(&self, token: Option<&str>, n: usize) -> Vec<Value> {
        let wait = async {
            loop {
                let page = body(self.get("/v1/usage/legs", token).await).await;
                let items = page["items"].as_array().unwrap().clone();
                if items.len() >= n {
                    return items;
                }
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .unwrap_or_else(|_| panic!("{n} usage records were not written within 10 s"))
    }
}

fn sums(v: &Value) -> (i64, i64, i64, i64) {
    let n = |k: &str| v[k].as_i64().unwrap();
    (
        n("legs"),
        n("input_tokens"),
        n("cached_input_tokens"),
        n("output_tokens"),
    )
}

#[tokio::test]
async fn totals_equal_what_the_provider_reported_across_native_and_compatible_routes() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| priced(open_config(dir), &fake)).await;
    fake.push("up-1", reply(1000, 400, 100));
    let mut leg = user_says("hi");
    leg["project"] = json!("p1");
    assert_eq!(app.leg(None, &leg).await.0, StatusCode::OK);
    fake.push("up-1", reply(300, 0, 30));
    let chat = json!({"model": "m1", "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(
        app.post("/v1/chat/completions", None, &chat).await.status(),
        StatusCode::OK
    );
    fake.push("up-2", reply(50, 20, 5));
    let messages =
        json!({"model": "m2", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(
        app.post("/v1/messages", None, &messages).await.status(),
        StatusCode::OK
    );

    let legs = app.settled_legs(None, 3).await;
    let routes: Vec<&str> = legs.iter().map(|l| l["route"].as_str().unwrap()).collect();
    assert_eq!(
        routes,
        ["messages", "chat_completions", "agent"],
        "newest first"
    );
    let agent = &legs[2];
    assert_eq!(
        (
            &agent["model"],
            &agent["provider"],
            &agent["project_id"],
            &agent["status"]
        ),
        (&json!("m1"), &json!("fake"), &json!("p1"), &json!("ok"))
    );
    assert_eq!(
        (
            agent["input_tokens"].as_i64(),
            agent["cached_input_tokens"].as_i64(),
            agent["output_tokens"].as_i64()
        ),
        (Some(1000), Some(400), Some(100))
    );
    assert_eq!(agent["request_id"].as_str().unwrap().len(), 32);
    // (1000 - 400) x 2 + 400 x 0.5 + 100 x 10 per million.
    let cost = agent["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.0024).abs() < 1e-12, "{cost}");
    assert_eq!(legs[0]["cost_usd"], Value::Null, "m2 has no prices");

    let usage = body(app.get("/v1/usage", None).await).await;
    assert_eq!(usage["group_by"], "day");
    assert_eq!(sums(&usage["totals"]), (3, 1350, 420, 135));
    let rows = usage["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "every leg ran today: {usage}");
    assert_eq!(rows[0]["key"], usage["to"]);
    // 0.0024 + (300 x 2 + 30 x 10) per million.
    let total = usage["totals"]["cost_usd"].as_f64().unwrap();
    assert!((total - 0.0033).abs() < 1e-12, "{total}");

    let by_model = body(app.get("/v1/usage?group_by=model", None).await).await;
    let keys: Vec<&Value> = by_model["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["key"])
        .collect();
    assert_eq!(keys, [&json!("m1"), &json!("m2")]);
    assert_eq!(sums(&by_model["rows"][0]), (2, 1300, 400, 130));
    assert_eq!(by_model["rows"][1]["cost_usd"], Value::Null);

    let by_project = body(app.get("/v1/usage?group_by=project", None).await).await;
    assert_eq!(
        by_project["rows"][0]["key"],
        Value::Null,
        "legs without a project"
    );
    assert_eq!(sums(&by_project["rows"][0]), (2, 350, 20, 35));
    assert_eq!(by_project["rows"][1]["key"], "p1");

    let metrics = app.get("/metrics", None).await.text().await.unwrap();
    assert!(
        metrics.contains("# TYPE relay_cost_usd_total counter")
            && metrics.contains("relay_cost_usd_total{model=\"m1\"} 0.0033"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_leg_no_model_answered_leaves_no_record() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| priced(open_config(dir), &fake)).await;
    for model in ["up-1", "up-2"] {
        fake.push(
            model,
            Reply::Status {
                status: 500,
                body: json!({"error": {"message": "down"}}),
                retry_after: None,
            },
        );
    }
    assert_eq!(
        app.leg(None, &user_says("hi")).await.0,
        StatusCode::BAD_GATEWAY
    );
    fake.push("up-1", reply(10, 0, 1));
    assert_eq!(app.leg(None, &user_says("hi")).await.0, StatusCode::OK);
    let legs = app.settled_legs(None, 1).await;
    assert_eq!(legs.len(), 1, "the refunded leg left no record: {legs:?}");
    assert_eq!(legs[0]["input_tokens"], 10);
}

#[tokio::test]
async fn pages_follow_the_cursor_and_bad_parameters_are_named() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| priced(open_config(dir), &fake)).await;
    for i in 1..=3 {
        fake.push("up-1", reply(i, 0, 1));
        assert_eq!(app.leg(None, &user_says("hi")).await.0, StatusCode::OK);
    }
    app.settled_legs(None, 3).await;
    let first = body(app.get("/v1/usage/legs?limit=2", None).await).await;
    let inputs = |p: &Value| -> Vec<i64> {
        p["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["input_tokens"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(inputs(&first), [3, 2]);
    let next = first["next"].as_str().unwrap();
    let second = body(
        app.get(&format!("/v1/usage/legs?limit=2&cursor={next}"), None)
            .await,
    )
    .await;
    assert_eq!(inputs(&second), [1]);
    assert_eq!(second["next"], Value::Null);

    for (path, field) in [
        ("/v1/usage?from=2026-02-30", "from"),
        ("/v1/usage?to=yesterday", "to"),
        ("/v1/usage?group_by=user", "group_by"),
        ("/v1/usage?from=2026-11-02&to=2026-11-01", "from"),
        ("/v1/usage/legs?limit=201", "limit"),
        ("/v1/usage/legs?cursor=zz", "cursor"),
    ] {
        let e = expect_error(app.get(path, None).await, 400, "invalid_request").await;
        assert!(
            e["message"].as_str().unwrap().starts_with(field),
            "{path}: {e}"
        );
    }
    // An explicit range that holds no leg.
    let old = body(
        app.get("/v1/usage?from=2020-01-01&to=2020-01-31", None)
            .await,
    )
    .await;
    assert_eq!(
        (&old["from"], &old["to"], &old["rows"]),
        (&json!("2020-01-01"), &json!("2020-01-31"), &json!([]))
    );
    assert_eq!(sums(&old["totals"]), (0, 0, 0, 0));
}

#[tokio::test]
async fn each_account_sees_its_own_and_admins_see_every_account_by_email() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| priced(auth_config(dir), &fake)).await;
    let ann = app.user("ann@example.com").await;
    let bob = app.user("bob@example.com").await;
    let root = app.user("root@example.com").await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        "root@example.com",
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    fake.push("up-1", reply(100, 0, 10));
    assert_eq!(app.leg(Some(&ann), &user_says("a")).await.0, StatusCode::OK);
    fake.push("up-1", reply(7, 0, 1));
    assert_eq!(app.leg(Some(&bob), &user_says("b")).await.0, StatusCode::OK);
    app.settled_legs(Some(&ann), 1).await;
    app.settled_legs(Some(&bob), 1).await;

    let mine = body(app.get("/v1/usage", Some(&ann)).await).await;
    assert_eq!(sums(&mine["totals"]), (1, 100, 0, 10), "only ann's leg");
    let page = body(app.get("/v1/usage/legs", Some(&bob)).await).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["input_tokens"], 7);

    expect_error(app.get("/v1/usage", None).await, 401, "unauthorized").await;
    expect_error(
        app.get("/v1/admin/usage", Some(&ann)).await,
        403,
        "forbidden",
    )
    .await;
    let all = body(app.get("/v1/admin/usage?group_by=user", Some(&root)).await).await;
    let rows: Vec<(Value, i64)> = all["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["key"].clone(), r["input_tokens"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        rows,
        [
            (json!("ann@example.com"), 100),
            (json!("bob@example.com"), 7)
        ]
    );
    assert_eq!(sums(&all["totals"]), (2, 107, 0, 11));

    // Deleting an account deletes its records.
    let r = app
        .client
        .delete(app.url("/v1/admin/users/ann@example.com"))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let all = body(app.get("/v1/admin/usage?group_by=user", Some(&root)).await).await;
    assert_eq!(all["rows"].as_array().unwrap().len(), 1, "{all}");
    assert_eq!(all["rows"][0]["key"], "bob@example.com");
}

#[tokio::test]
async fn the_gdpr_cascade_erases_the_callers_records() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| priced(open_config(dir), &fake)).await;
    fake.push("up-1", reply(10, 0, 1));
    assert_eq!(app.leg(None, &user_says("hi")).await.0, StatusCode::OK);
    app.settled_legs(None, 1).await;
    let r = app
        .client
        .delete(app.url("/v1/memory/all"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let page = body(app.get("/v1/usage/legs", None).await).await;
    assert_eq!(page["items"], json!([]));
    let usage = body(app.get("/v1/usage", None).await).await;
    assert_eq!(sums(&usage["totals"]), (0, 0, 0, 0));
}

#[tokio::test]
async fn records_past_the_retention_are_pruned() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = priced(open_config(dir), &fake);
        c.usage.retention_days = 10;
        c
    })
    .await;
    let now = relay_server::clock::now() as i64;
    let record = |days_ago: i64, input: i64| LegRecord {
        user_id: "local".into(),
        request_id: format!("r{days_ago}"),
        at: now - days_ago * 86_400,
        route: relay_server::domain::Door::Agent,
        model: "m1".into(),
        provider: "fake".into(),
        project_id: None,
        status: "ok",
        input_tokens: input,
        cached_input_tokens: 0,
        cache_write_tokens: 0,
        output_tokens: 1,
        reasoning_tokens: 0,
        ttfb_ms: 1,
        duration_ms: 2,
        cost_usd: None,
        reservation: None,
        estimated: false,
        server_tool_uses: 0,
    };
    let store = app.state.ledger().store();
    store
        .insert_legs(&[record(11, 500), record(9, 7)])
        .await
        .unwrap();
    // The pruner's first pass at start-up may have run after the insert already.
    assert!(app.state.ledger().prune_now().await.unwrap() <= 1);
    let page = body(app.get("/v1/usage/legs", None).await).await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["input_tokens"], 7, "the 9-day-old record stays");
    // The sums (read from the daily roll-up) lose the pruned record too.
    let from = relay_server::store::usage::civil_from_days(now.div_euclid(86_400) - 20);
    let from = format!("{:04}-{:02}-{:02}", from.0, from.1, from.2);
    let usage = body(app.get(&format!("/v1/usage?from={from}"), None).await).await;
    assert_eq!(
        (&usage["totals"]["legs"], &usage["totals"]["input_tokens"]),
        (&json!(1), &json!(7)),
        "{usage}"
    );
}

#[tokio::test]
async fn a_used_up_token_budget_refuses_legs_before_the_provider_and_takes_no_unit() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| priced(auth_config(dir), &fake)).await;
    let ann = app.user("ann@example.com").await;
    let root = app.user("root@example.com").await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        "root@example.com",
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    let patch = |budget: i64| {
        app.client
            .patch(app.url("/v1/admin/users/ann@example.com"))
            .bearer_auth(&root)
            .json(&json!({"token_budget": budget}))
            .send()
    };
    expect_error(patch(-2).await.unwrap(), 400, "invalid_request").await;
    assert_eq!(patch(100).await.unwrap().status(), StatusCode::OK);
    let me = body(app.me(Some(&ann)).await).await;
    assert_eq!(
        (
            &me["token_budget"],
            &me["tokens_used"],
            &me["tokens_remaining"]
        ),
        (&json!(100), &json!(0), &json!(100))
    );

    // Admitted under the budget, it finishes past it: 90 + 20 tokens.
    fake.push("up-1", reply(90, 30, 20));
    assert_eq!(app.leg(Some(&ann), &user_says("a")).await.0, StatusCode::OK);
    app.settled_legs(Some(&ann), 1).await;
    let me = body(app.me(Some(&ann)).await).await;
    assert_eq!(
        (&me["tokens_used"], &me["tokens_remaining"], &me["used"]),
        (&json!(110), &json!(0), &json!(1))
    );

    let asked = fake.requests().len();
    let (status, lines) = app.leg(Some(&ann), &user_says("b")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(lines[0]["error"], "budget_exceeded");
    let chat = json!({"model": "m1", "messages": [{"role": "user", "content": "x"}]});
    let r = app.post("/v1/chat/completions", Some(&ann), &chat).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let b = body(r).await;
    assert_eq!(
        (&b["error"]["type"], &b["error"]["code"]),
        (&json!("permission_error"), &json!("budget_exceeded"))
    );
    assert_eq!(fake.requests().len(), asked, "the provider saw no request");
    assert_eq!(
        body(app.me(Some(&ann)).await).await["used"],
        1,
        "no unit taken"
    );

    // Erasing the records leaves the month's count; raising the budget lets legs through again.
    let r = app
        .client
        .delete(app.url("/v1/memory/all"))
        .bearer_auth(&ann)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(app.me(Some(&ann)).await).await["tokens_used"], 110);
    assert_eq!(patch(-1).await.unwrap().status(), StatusCode::OK);
    fake.push("up-1", reply(1, 0, 1));
    assert_eq!(app.leg(Some(&ann), &user_says("c")).await.0, StatusCode::OK);
    assert_eq!(body(app.me(Some(&ann)).await).await["tokens_remaining"], -1);
}

#[tokio::test]
async fn closing_the_ledger_writes_the_batch_it_was_gathering() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = priced(open_config(dir), &fake);
        // Nothing would be written for a minute but for the close.
        c.usage.flush_ms = 60_000;
        c.usage.batch_size = 10_000;
        c
    })
    .await;
    fake.push("up-1", reply(33, 0, 3));
    assert_eq!(app.leg(None, &user_says("hi")).await.0, StatusCode::OK);
    // A leg no longer counted as active has queued its record.
    wait_for_metric(&app, "relay_agent_active_streams 0").await;
    let page = body(app.get("/v1/usage/legs", None).await).await;
    assert_eq!(page["items"], json!([]), "still gathered in the batch");
    app.state.ledger().close().await;
    let page = body(app.get("/v1/usage/legs", None).await).await;
    assert_eq!(page["items"][0]["input_tokens"], 33);
}

#[tokio::test]
async fn with_the_ledger_off_a_leg_leaves_no_record_but_its_cost_is_counted() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = priced(open_config(dir), &fake);
        c.usage.ledger = false;
        c
    })
    .await;
    fake.push("up-1", reply(40, 0, 4));
    assert_eq!(app.leg(None, &user_says("hi")).await.0, StatusCode::OK);
    // The leg has ended and priced itself: 40 × 2 + 4 × 10 per million tokens.
    wait_for_metric(&app, "relay_cost_usd_total{model=\"m1\"} 0.00012").await;
    // Closing writes whatever was queued (as with the ledger on): nothing was.
    app.state.ledger().close().await;
    let page = body(app.get("/v1/usage/legs", None).await).await;
    assert_eq!(page["items"], json!([]));
    let usage = body(app.get("/v1/usage?group_by=model", None).await).await;
    assert_eq!(usage["totals"]["legs"], 0, "{usage}");
}

async fn wait_for_metric(app: &TestApp, needle: &str) {
    let wait = async {
        while !app
            .get("/metrics", None)
            .await
            .text()
            .await
            .unwrap()
            .contains(needle)
        {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("`{needle}` did not show within 10 s"));
}

#[tokio::test]
async fn a_leg_the_client_left_is_recorded_as_cancelled_and_a_late_failure_as_error() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| priced(open_config(dir), &fake)).await;
    fake.push("up-1", Reply::SseThenSilence(vec![up::text_chunk("par")]));
    let mut r = app.post("/v1/agent/stream", None, &user_says("hi")).await;
    assert_eq!(r.status(), StatusCode::OK);
    r.chunk().await.unwrap();
    drop(r);
    let legs = app.settled_legs(None, 1).await;
    // The provider never counted: Relay's estimate (the prompt "hi", the piece streamed), marked.
    assert_eq!(
        (
            &legs[0]["status"],
            &legs[0]["input_tokens"],
            &legs[0]["output_tokens"],
            &legs[0]["estimated"]
        ),
        (&json!("cancelled"), &json!(1), &json!(1), &json!(true))
    );
    fake.push("up-1", Reply::SseThenCut(vec![up::text_chunk("par")]));
    assert_eq!(app.leg(None, &user_says("hi")).await.0, StatusCode::OK);
    let legs = app.settled_legs(None, 2).await;
    assert_eq!(legs[0]["status"], "error");
    assert!(legs[0]["duration_ms"].as_i64().unwrap() >= legs[0]["ttfb_ms"].as_i64().unwrap());
}
