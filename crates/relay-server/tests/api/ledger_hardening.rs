//! The usage ledger against hostile figures and erasure (issue 38), on either store: a provider's
//! absurd token counts are clamped and break no batch and no read (nor do absurd rows already
//! stored); a leg in flight while its account is deleted, or while `DELETE /v1/memory/all` runs,
//! leaves no record; a client's `x-request-id` is capped and sanitised before it is stored.

use std::sync::Arc;
use std::time::Duration;

use relay_server::config::Config;
use relay_server::store::usage::LegRecord;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::agent::{user_says, with_fake};
use crate::fake_upstream::{self as up, FakeUpstream, Reply};
use crate::helpers::{TestApp, auth_config, body};

/// The ledger's largest token figure per record (`store::usage::MAX_TOKENS`).
const MAX: i64 = 1_000_000_000;

fn config(dir: &std::path::Path, fake: &FakeUpstream) -> Config {
    let mut c = with_fake(auth_config(dir), fake);
    c.limits.agent_burst = 1_000;
    c.usage.flush_ms = 5;
    c
}

/// A streamed answer reporting `input` and `output` tokens.
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

/// Signs up `root@example.com` and makes it an admin; its token.
async fn admin(app: &TestApp) -> String {
    let root = app.user("root@example.com").await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        "root@example.com",
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    root
}

async fn user_id(app: &TestApp, email: &str) -> String {
    let users = app.state.auth().unwrap().list_users().await.unwrap();
    users.into_iter().find(|u| u.email == email).unwrap().id
}

/// Runs `sql` on the app's store as another client would.
async fn raw(app: &TestApp, sql: &str) {
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    match app.pg_url() {
        Some(_) => {
            let pool = app.pg_pool().await;
            sqlx::raw_sql(sql).execute(&pool).await.unwrap();
            pool.close().await;
        }
        None => {
            let pool = sqlite_pool(app).await;
            sqlx::raw_sql(sql).execute(&pool).await.unwrap();
            pool.close().await;
        }
    }
}

async fn sqlite_pool(app: &TestApp) -> sqlx::SqlitePool {
    let url = format!("sqlite://{}", app.dir.path().join("relay.db").display());
    sqlx::SqlitePool::connect(&url).await.unwrap()
}

/// The rows `user_id` has in each usage table: records, daily roll-up, month counts.
async fn rows_of(app: &TestApp, user_id: &str) -> [i64; 3] {
    let mut out = [0; 3];
    for (i, table) in ["usage_legs", "usage_daily", "usage_months"]
        .into_iter()
        .enumerate()
    {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE user_id = '{user_id}'");
        let sql = sqlx::AssertSqlSafe(sql);
        out[i] = match app.pg_url() {
            Some(_) => {
                let pool = app.pg_pool().await;
                sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap()
            }
            None => {
                let pool = sqlite_pool(app).await;
                sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap()
            }
        };
    }
    out
}

/// The caller's records once at least `n` are written (the ledger writes off the leg's path).
async fn legs(app: &TestApp, token: &str, n: usize) -> Vec<Value> {
    let wait = async {
        loop {
            let page = body(app.get("/v1/usage/legs", Some(token)).await).await;
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

async fn active_streams_zero(app: &TestApp) {
    let wait = async {
        while !app
            .get("/metrics", None)
            .await
            .text()
            .await
            .unwrap()
            .contains("relay_agent_active_streams 0")
        {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the leg did not end within 10 s");
}

#[tokio::test]
async fn absurd_token_counts_are_clamped_and_lose_no_batch_and_break_no_read() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = config(dir, &fake);
        // The three records below are written as one batch.
        c.usage.batch_size = 3;
        c.usage.flush_ms = 60_000;
        c
    })
    .await;
    let ann = app.user("ann@example.com").await;
    let bob = app.user("bob@example.com").await;
    let root = admin(&app).await;
    // 2^63 - 1 and 2^64 - 1: before issue 38 the second record of the batch overflowed the
    // month's count (PostgreSQL refused the whole batch, bob's record with it).
    fake.push(
        "up-1",
        reply(9_223_372_036_854_775_807, 9_223_372_036_854_775_807),
    );
    fake.push("up-1", reply(u64::MAX, 1));
    fake.push("up-1", reply(7, 1));
    for token in [&ann, &ann, &bob] {
        assert_eq!(
            app.leg(Some(token), &user_says("x")).await.0,
            StatusCode::OK
        );
    }
    let bobs = legs(&app, &bob, 1).await;
    assert_eq!(
        bobs[0]["input_tokens"], 7,
        "the other account's record is kept"
    );
    let anns = legs(&app, &ann, 2).await;
    let figures: Vec<(i64, i64)> = anns
        .iter()
        .map(|l| {
            let n = |k: &str| l[k].as_i64().unwrap();
            (n("input_tokens"), n("output_tokens"))
        })
        .collect();
    assert_eq!(figures, [(MAX, 1), (MAX, MAX)], "clamped, newest first");
    let me = app.me(Some(&ann)).await;
    assert_eq!(me.status(), StatusCode::OK);
    assert_eq!(body(me).await["tokens_used"], 3 * MAX + 1);
    let all = app.get("/v1/admin/usage?group_by=user", Some(&root)).await;
    assert_eq!(all.status(), StatusCode::OK);
    let all = body(all).await;
    assert_eq!(all["rows"][0]["key"], "ann@example.com");
    assert_eq!(all["rows"][0]["input_tokens"], 2 * MAX);
    assert_eq!(all["totals"]["input_tokens"], 2 * MAX + 7);

    // Rows stored before the clamp with figures whose sums pass 2^63 (two models today, and the
    // month's count at the largest integer): every read still answers, held at 2^63 - 1.
    let ann_id = user_id(&app, "ann@example.com").await;
    let day = relay_server::clock::now() as i64 / 86_400;
    raw(
        &app,
        &format!(
            "INSERT INTO usage_daily (user_id, day, model, project, legs, input, cached, cache_write, output, cost)
             VALUES ('{ann_id}', {day}, 'x1', '', 1, 9223372036854775807, 0, 0, 9223372036854775807, NULL),
                    ('{ann_id}', {day}, 'x2', '', 1, 9223372036854775807, 0, 0, 9223372036854775807, NULL);
             UPDATE usage_months SET tokens = 9223372036854775807 WHERE user_id = '{ann_id}';"
        ),
    )
    .await;
    for (path, token) in [
        ("/v1/admin/usage?group_by=user", &root),
        ("/v1/admin/usage", &root),
        ("/v1/usage?group_by=model", &ann),
        ("/v1/usage/legs", &ann),
        ("/v1/me", &ann),
    ] {
        let r = app.get(path, Some(token)).await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
    let usage = body(app.get("/v1/usage", Some(&ann)).await).await;
    assert_eq!(usage["totals"]["input_tokens"], i64::MAX, "{usage}");
    // The next leg runs, and its record adds to the full month's count without overflowing it
    // (the month's count is the budget's: unlimited here).
    fake.push("up-1", reply(5, 5));
    let (status, lines) = app.leg(Some(&ann), &user_says("again")).await;
    assert_eq!(status, StatusCode::OK, "{lines:?}");
    // Two more legs fill the batch of three.
    for _ in 0..2 {
        assert_eq!(app.leg(Some(&bob), &user_says("y")).await.0, StatusCode::OK);
    }
    legs(&app, &ann, 3).await;
    let me = body(app.me(Some(&ann)).await).await;
    assert_eq!(me["tokens_used"], i64::MAX, "{me}");
    if app.pg_url().is_none() {
        // SQLite turned an overflowing sum into a float before issue 38: read as the largest integer.
        raw(
            &app,
            &format!("UPDATE usage_months SET tokens = 1.8e19 WHERE user_id = '{ann_id}'"),
        )
        .await;
        let me = app.me(Some(&ann)).await;
        assert_eq!(me.status(), StatusCode::OK);
        assert_eq!(body(me).await["tokens_used"], i64::MAX);
    }
}

/// A leg of `token` held open by the provider after its first output; `gate` lets it finish
/// (50 input and 5 output tokens).
async fn held_leg(
    app: &TestApp,
    fake: &FakeUpstream,
    token: &str,
) -> (reqwest::Response, Arc<Notify>) {
    let gate = Arc::new(Notify::new());
    fake.push(
        "up-1",
        Reply::SseGated {
            head: vec![up::text_chunk("par")],
            gate: gate.clone(),
            tail: vec![up::finish("stop"), up::usage(50, 5), up::DONE.into()],
        },
    );
    let r = app
        .post("/v1/agent/stream", Some(token), &user_says("hi"))
        .await;
    // The headers come after the provider's first output: the leg is running.
    assert_eq!(r.status(), StatusCode::OK);
    (r, gate)
}

/// Lets a held leg finish and waits until its record went through the ledger: the leg has
/// ended, and a later leg of `other` (queued after it) is written.
async fn finish_held(
    app: &TestApp,
    fake: &FakeUpstream,
    held: (reqwest::Response, Arc<Notify>),
    other: &str,
    others: usize,
) {
    let (r, gate) = held;
    gate.notify_one();
    let text = r.text().await.unwrap();
    assert!(text.contains("\"done\""), "{text}");
    active_streams_zero(app).await;
    fake.push("up-1", reply(3, 1));
    assert_eq!(
        app.leg(Some(other), &user_says("later")).await.0,
        StatusCode::OK
    );
    legs(app, other, others).await;
}

#[tokio::test]
async fn a_leg_in_flight_when_its_account_is_deleted_leaves_nothing_behind() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| config(dir, &fake)).await;
    let ann = app.user("ann@example.com").await;
    let bob = app.user("bob@example.com").await;
    let root = admin(&app).await;
    let ann_id = user_id(&app, "ann@example.com").await;

    let held = held_leg(&app, &fake, &ann).await;
    let r = app
        .client
        .delete(app.url("/v1/admin/users/ann@example.com"))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    finish_held(&app, &fake, held, &bob, 1).await;

    assert_eq!(
        rows_of(&app, &ann_id).await,
        [0, 0, 0],
        "no record, roll-up or month count under the deleted account's id"
    );
    let all = body(app.get("/v1/admin/usage?group_by=user", Some(&root)).await).await;
    let keys: Vec<&Value> = all["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["key"])
        .collect();
    assert_eq!(keys, [&json!("bob@example.com")], "{all}");
}

#[tokio::test]
async fn a_leg_in_flight_during_delete_memory_all_leaves_no_record_but_counts_in_the_budget() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| config(dir, &fake)).await;
    let ann = app.user("ann@example.com").await;
    let bob = app.user("bob@example.com").await;
    let ann_id = user_id(&app, "ann@example.com").await;

    let held = held_leg(&app, &fake, &ann).await;
    let r = app
        .client
        .delete(app.url("/v1/memory/all"))
        .bearer_auth(&ann)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    finish_held(&app, &fake, held, &bob, 1).await;

    let page = body(app.get("/v1/usage/legs", Some(&ann)).await).await;
    assert_eq!(page["items"], json!([]), "the leg's record was dropped");
    let usage = body(app.get("/v1/usage", Some(&ann)).await).await;
    assert_eq!(usage["totals"]["legs"], 0, "{usage}");
    assert_eq!(rows_of(&app, &ann_id).await, [0, 0, 1]);
    // The month's count is no personal record: it keeps the leg's tokens, so that erasing during
    // a leg does not step around the budget.
    assert_eq!(body(app.me(Some(&ann)).await).await["tokens_used"], 55);

    // A leg that starts after the erasure is recorded as usual.
    let now = relay_server::clock::now() as i64;
    let later = LegRecord {
        user_id: ann_id.clone(),
        request_id: "after".into(),
        at: now + 5,
        route: relay_server::domain::Door::Agent,
        model: "m1".into(),
        provider: "fake".into(),
        project_id: None,
        status: "ok",
        input_tokens: 2,
        cached_input_tokens: 0,
        cache_write_tokens: 0,
        output_tokens: 1,
        reasoning_tokens: 0,
        ttfb_ms: 1,
        duration_ms: 10,
        cost_usd: None,
        reservation: None,
        estimated: false,
        server_tool_uses: 0,
    };
    app.state
        .ledger()
        .store()
        .insert_legs(&[later])
        .await
        .unwrap();
    let page = body(app.get("/v1/usage/legs", Some(&ann)).await).await;
    assert_eq!(page["items"][0]["request_id"], "after", "{page}");
}

#[tokio::test]
async fn a_clients_request_id_is_capped_and_sanitised_before_it_is_stored_or_echoed() {
    let fake = FakeUpstream::start().await;
    let app = TestApp::spawn_with(|dir| config(dir, &fake)).await;
    let ann = app.user("ann@example.com").await;
    let send = |id: Vec<u8>| {
        app.client
            .post(app.url("/v1/agent/stream"))
            .bearer_auth(&ann)
            .header(
                "x-request-id",
                reqwest::header::HeaderValue::from_bytes(&id).unwrap(),
            )
            .json(&user_says("hi"))
            .send()
    };
    // 7,000 bytes with spaces, a tab and bytes past ASCII in them.
    let mut long = b"a b\tc\xc3\xa9".to_vec();
    long.extend(std::iter::repeat_n(b'z', 7_000));
    let r = send(long).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let echoed = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    r.text().await.unwrap();
    assert_eq!(echoed.len(), 128);
    assert_eq!(echoed, format!("abc{}", "z".repeat(125)));
    let stored = legs(&app, &ann, 1).await;
    assert_eq!(stored[0]["request_id"], echoed.as_str());

    // Nothing visible left: Relay makes its own id.
    let r = send(b" \t ".to_vec()).await.unwrap();
    let echoed = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    r.text().await.unwrap();
    assert_eq!(echoed.len(), 32, "{echoed}");
    assert!(echoed.bytes().all(|b| b.is_ascii_hexdigit()));
    let stored = legs(&app, &ann, 2).await;
    assert_eq!(stored[0]["request_id"], echoed.as_str());

    // The compatible doors keep the same id.
    let chat = json!({"model": "m1", "messages": [{"role": "user", "content": "x"}]});
    let r = app
        .client
        .post(app.url("/v1/chat/completions"))
        .bearer_auth(&ann)
        .header(
            "x-request-id",
            reqwest::header::HeaderValue::from_bytes(b"door \x80-1").unwrap(),
        )
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["x-request-id"], "door-1");
    r.text().await.unwrap();
    let stored = legs(&app, &ann, 3).await;
    assert_eq!(stored[0]["request_id"], "door-1");
}
