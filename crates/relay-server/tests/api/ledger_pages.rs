//! The ledger's record pages as the console's Requests view reads them (issue 42): the caller's
//! filtered by model, status and project with the cursor continuing under the filters, and every
//! account's for admins, by email; on either store.

use relay_server::store::usage::LegRecord;
use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::{TestApp, body, expect_error};

fn record(
    user_id: &str,
    n: i64,
    model: &str,
    status: &'static str,
    project: Option<&str>,
) -> LegRecord {
    LegRecord {
        user_id: user_id.into(),
        request_id: format!("{user_id}-{n}"),
        at: relay_server::clock::now() as i64 - 100 + n,
        route: relay_server::domain::Door::Agent,
        model: model.into(),
        provider: "fake".into(),
        project_id: project.map(Into::into),
        status,
        input_tokens: 10 + n,
        cached_input_tokens: 0,
        cache_write_tokens: 0,
        output_tokens: 1,
        reasoning_tokens: 0,
        ttfb_ms: 1,
        duration_ms: 5,
        cost_usd: None,
        reservation: None,
        estimated: false,
        server_tool_uses: 0,
    }
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["request_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn user_id(app: &TestApp, email: &str) -> String {
    let auth = app.state.auth().unwrap();
    auth.user_by_email(email).await.unwrap().unwrap().0.id
}

/// Ann's eight records (models m1/m2, statuses ok/error/cancelled, projects p1/p2/none) and bob's
/// two; ann, bob and an admin's tokens.
async fn seeded() -> (TestApp, String, String, String) {
    let app = TestApp::with_auth().await;
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
    let (a, b) = (
        user_id(&app, "ann@example.com").await,
        user_id(&app, "bob@example.com").await,
    );
    let records = vec![
        record(&a, 1, "m1", "ok", Some("p1")),
        record(&a, 2, "m2", "ok", Some("p1")),
        record(&a, 3, "m1", "error", Some("p2")),
        record(&a, 4, "m1", "cancelled", None),
        record(&a, 5, "m1", "ok", Some("p1")),
        record(&a, 6, "m2", "error", Some("p1")),
        record(&a, 7, "m1", "ok", Some("p1")),
        record(&a, 8, "m1", "ok", Some("p2")),
        record(&b, 1, "m1", "ok", Some("p1")),
        record(&b, 2, "m2", "ok", Some("p1")),
    ];
    app.state
        .ledger()
        .store()
        .insert_legs(&records)
        .await
        .unwrap();
    (app, ann, bob, root)
}

#[tokio::test]
async fn the_callers_records_filter_by_model_status_and_project_and_page_under_the_filters() {
    let (app, ann, _, _) = seeded().await;
    let a = user_id(&app, "ann@example.com").await;
    let r = |n: i64| format!("{a}-{n}");
    let get = |q: String| {
        let app = &app;
        let ann = ann.clone();
        async move { body(app.get(&format!("/v1/usage/legs?{q}"), Some(&ann)).await).await }
    };
    assert_eq!(
        ids(&get(String::new()).await),
        (1..=8).rev().map(r).collect::<Vec<_>>(),
        "only ann's, newest first"
    );
    assert_eq!(ids(&get("model=m2".into()).await), [r(6), r(2)]);
    assert_eq!(ids(&get("status=error".into()).await), [r(6), r(3)]);
    assert_eq!(ids(&get("status=cancelled".into()).await), [r(4)]);
    assert_eq!(ids(&get("project_id=p2".into()).await), [r(8), r(3)]);
    assert_eq!(
        ids(&get("model=m1&status=ok&project_id=p1".into()).await),
        [r(7), r(5), r(1)]
    );
    assert_eq!(ids(&get("model=nope".into()).await), Vec::<String>::new());
    // An empty value is no filter, as a form sends it.
    assert_eq!(
        ids(&get("model=&status=&project_id=".into()).await).len(),
        8
    );
    // Pages of two under a filter: the cursor continues within it.
    let first = get("limit=2&model=m1&status=ok".into()).await;
    assert_eq!(ids(&first), [r(8), r(7)]);
    let next = first["next"].as_str().unwrap().to_owned();
    let second = get(format!("limit=2&model=m1&status=ok&cursor={next}")).await;
    assert_eq!(ids(&second), [r(5), r(1)]);
    assert!(second["next"].is_null(), "{second}");
    // The caller's page never names an account.
    assert!(first["items"][0].get("email").is_none());

    let bad = expect_error(
        app.get("/v1/usage/legs?status=done", Some(&ann)).await,
        400,
        "invalid_request",
    )
    .await;
    assert!(
        bad["message"].as_str().unwrap().starts_with("status"),
        "{bad}"
    );
}

#[tokio::test]
async fn admins_page_every_accounts_records_by_email_and_others_are_refused() {
    let (app, ann, bob, root) = seeded().await;
    let b = user_id(&app, "bob@example.com").await;
    let all = body(app.get("/v1/admin/usage/legs?limit=100", Some(&root)).await).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 10);
    let emails: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["email"].as_str().unwrap())
        .collect();
    assert_eq!(
        emails.iter().filter(|e| **e == "bob@example.com").count(),
        2
    );
    assert_eq!(
        emails.iter().filter(|e| **e == "ann@example.com").count(),
        8
    );

    // One account, by email in any case, with the other filters.
    let bobs = body(
        app.get(
            "/v1/admin/usage/legs?user=BOB@example.com&model=m2",
            Some(&root),
        )
        .await,
    )
    .await;
    assert_eq!(ids(&bobs), [format!("{b}-2")]);
    assert_eq!(bobs["items"][0]["email"], "bob@example.com");
    let p1 = body(
        app.get(
            "/v1/admin/usage/legs?project_id=p1&status=ok&limit=3",
            Some(&root),
        )
        .await,
    )
    .await;
    assert_eq!(p1["items"].as_array().unwrap().len(), 3);
    assert!(p1["next"].is_string());

    expect_error(
        app.get("/v1/admin/usage/legs?user=nobody@example.com", Some(&root))
            .await,
        404,
        "not_found",
    )
    .await;
    expect_error(
        app.get("/v1/admin/usage/legs?status=nope", Some(&root))
            .await,
        400,
        "invalid_request",
    )
    .await;
    expect_error(
        app.get("/v1/admin/usage/legs?limit=0", Some(&root)).await,
        400,
        "invalid_request",
    )
    .await;
    for token in [&ann, &bob] {
        expect_error(
            app.get("/v1/admin/usage/legs", Some(token)).await,
            403,
            "forbidden",
        )
        .await;
    }
    assert_eq!(
        app.get("/v1/admin/usage/legs", None).await.status(),
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn in_open_mode_the_admin_page_is_the_local_callers() {
    let app = TestApp::open().await;
    let records = [
        record("local", 1, "m1", "ok", None),
        record("local", 2, "m1", "error", None),
    ];
    app.state
        .ledger()
        .store()
        .insert_legs(&records)
        .await
        .unwrap();
    let all = body(app.get("/v1/admin/usage/legs?status=error", None).await).await;
    assert_eq!(ids(&all), ["local-2"]);
    assert_eq!(all["items"][0]["email"], "local");
    let mine = body(app.get("/v1/admin/usage/legs?user=local", None).await).await;
    assert_eq!(mine["items"].as_array().unwrap().len(), 2);
}
