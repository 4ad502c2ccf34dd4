//! API keys (issue 40): created and shown once, listed without the key, revoked by their owner or
//! an admin, stored hashed, and counted against the owner's quota. Runs on both stores.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, body, expect_error};

async fn delete(app: &TestApp, path: &str, token: &str) -> reqwest::Response {
    app.client
        .delete(app.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_key_is_shown_once_works_as_its_owner_and_stops_when_revoked() {
    let app = TestApp::with_auth().await;
    let owner = app.user("ada@example.com").await;
    let r = app
        .post(
            "/v1/keys",
            Some(&owner),
            &json!({"name": "ci", "expires_in_days": 30}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let created = body(r).await;
    let key = created["key"].as_str().unwrap();
    assert!(key.starts_with("rlk_") && key.len() == 47, "{key}");
    assert_eq!(created["name"], "ci");
    assert_eq!(created["prefix"], &key[..12]);
    let expires = created["expires_at"].as_f64().unwrap() - created["created_at"].as_f64().unwrap();
    assert!((expires - 30.0 * 86_400.0).abs() < 1.0);

    let me = body(app.me(Some(key)).await).await;
    assert_eq!(me["email"], "ada@example.com");

    let list = body(app.get("/v1/keys", Some(&owner)).await).await;
    let listed = &list["keys"].as_array().unwrap()[0];
    assert_eq!(listed["id"], created["id"]);
    assert_eq!(listed["prefix"], created["prefix"]);
    assert!(
        listed.get("key").is_none(),
        "the key itself is never listed: {listed}"
    );
    assert!(
        listed["last_used_at"].as_f64().is_some(),
        "the /v1/me call above used it: {list}"
    );

    // Another account cannot revoke it.
    let other = app.user("bob@example.com").await;
    let id = created["id"].as_str().unwrap();
    expect_error(
        delete(&app, &format!("/v1/keys/{id}"), &other).await,
        404,
        "not_found",
    )
    .await;
    assert_eq!(
        body(app.get("/v1/keys", Some(&other)).await).await["keys"],
        json!([])
    );

    assert_eq!(
        delete(&app, &format!("/v1/keys/{id}"), &owner)
            .await
            .status(),
        200
    );
    expect_error(app.me(Some(key)).await, 401, "unauthorized").await;
    assert_eq!(
        body(app.get("/v1/keys", Some(&owner)).await).await["keys"],
        json!([])
    );
}

#[tokio::test]
async fn keys_survive_a_signout_of_every_session() {
    let app = TestApp::with_auth().await;
    let owner = app.user("ada@example.com").await;
    let key = body(
        app.post("/v1/keys", Some(&owner), &json!({"name": "ci"}))
            .await,
    )
    .await;
    let key = key["key"].as_str().unwrap().to_owned();
    let user = app
        .state
        .auth()
        .unwrap()
        .user_by_email("ada@example.com")
        .await
        .unwrap()
        .unwrap()
        .0;
    app.state
        .signin()
        .unwrap()
        .revoke_user_sessions(&user.id)
        .await
        .unwrap();
    expect_error(app.me(Some(&owner)).await, 401, "unauthorized").await;
    assert_eq!(app.me(Some(&key)).await.status(), 200);
}

#[tokio::test]
async fn keys_are_stored_hashed() {
    let app = TestApp::with_auth().await;
    let owner = app.user("ada@example.com").await;
    let key = body(
        app.post("/v1/keys", Some(&owner), &json!({"name": "ci"}))
            .await,
    )
    .await;
    let key = key["key"].as_str().unwrap();
    let hash = relay_server::accounts::token_hash(key);
    // The database holds the hash and the 12-character prefix, never the key.
    let found: Vec<String> = if let Some(url) = app.pg_url() {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query_scalar("SELECT token_hash FROM sessions WHERE key_id IS NOT NULL")
            .fetch_all(&pool)
            .await
            .unwrap()
    } else {
        let url = format!("sqlite://{}", app.dir.path().join("relay.db").display());
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        sqlx::query_scalar("SELECT token_hash FROM sessions WHERE key_id IS NOT NULL")
            .fetch_all(&pool)
            .await
            .unwrap()
    };
    assert_eq!(found, [hash]);
}

#[tokio::test]
async fn a_keys_legs_count_against_its_owners_quota() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = crate::helpers::auth_config(dir);
        c.auth.as_mut().unwrap().default_limit = 1;
        c
    })
    .await;
    let owner = app.user("ada@example.com").await;
    let key = body(
        app.post("/v1/keys", Some(&owner), &json!({"name": "agent"}))
            .await,
    )
    .await;
    let key = key["key"].as_str().unwrap();
    let leg = json!({"messages": [{"role": "user", "content": "hi"}]});
    let r = app.post("/v1/agent/stream", Some(key), &leg).await;
    assert_eq!(r.status(), StatusCode::OK);
    r.text().await.unwrap();
    let me = body(app.me(Some(&owner)).await).await;
    assert_eq!(me["used"], 1, "{me}");
    expect_error(
        app.post("/v1/agent/stream", Some(&owner), &leg).await,
        403,
        "quota_exceeded",
    )
    .await;
}

#[tokio::test]
async fn bad_key_requests_are_400() {
    let app = TestApp::with_auth().await;
    let owner = app.user("ada@example.com").await;
    for bad in [
        json!({"name": ""}),
        json!({"name": "x".repeat(65)}),
        json!({"name": "a\u{7}b"}),
        json!({"name": "ci", "expires_in_days": 0}),
        json!({"name": "ci", "expires_in_days": 4000}),
    ] {
        expect_error(
            app.post("/v1/keys", Some(&owner), &bad).await,
            400,
            "invalid_request",
        )
        .await;
    }
    expect_error(
        app.post("/v1/keys", None, &json!({"name": "ci"})).await,
        401,
        "unauthorized",
    )
    .await;
}

#[tokio::test]
async fn admins_list_and_revoke_anyones_keys() {
    let app = TestApp::with_auth().await;
    let root = app.user("root@example.com").await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        "root@example.com",
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    let ada = app.user("ada@example.com").await;
    let key = body(
        app.post("/v1/keys", Some(&ada), &json!({"name": "laptop"}))
            .await,
    )
    .await;
    expect_error(
        app.get("/v1/admin/keys", Some(&ada)).await,
        403,
        "forbidden",
    )
    .await;
    let all = body(app.get("/v1/admin/keys", Some(&root)).await).await;
    assert_eq!(all["keys"][0]["email"], "ada@example.com");
    assert_eq!(all["keys"][0]["name"], "laptop");
    let id = key["id"].as_str().unwrap();
    expect_error(
        delete(&app, &format!("/v1/admin/keys/{id}"), &ada).await,
        403,
        "forbidden",
    )
    .await;
    assert_eq!(
        delete(&app, &format!("/v1/admin/keys/{id}"), &root)
            .await
            .status(),
        200
    );
    expect_error(app.me(key["key"].as_str()).await, 401, "unauthorized").await;
    expect_error(
        delete(&app, &format!("/v1/admin/keys/{id}"), &root).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn open_mode_has_no_keys() {
    let app = TestApp::open().await;
    expect_error(
        app.post("/v1/keys", None, &json!({"name": "ci"})).await,
        404,
        "not_found",
    )
    .await;
    expect_error(app.get("/v1/keys", None).await, 404, "not_found").await;
}
