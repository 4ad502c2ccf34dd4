//! Account administration over HTTP (issue 16): admins list, change and delete accounts with the
//! same effects as `relay users …`; everybody else gets 403 `forbidden`. Runs on both stores.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, body, expect_error};

/// Signs up `email` and makes it an admin the way `relay users set --role admin` does.
async fn admin(app: &TestApp, email: &str) -> String {
    let token = app.user(email).await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        email,
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    token
}

async fn patch(app: &TestApp, token: &str, email: &str, body: &Value) -> reqwest::Response {
    app.client
        .patch(app.url(&format!("/v1/admin/users/{email}")))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn delete(app: &TestApp, token: &str, email: &str) -> reqwest::Response {
    app.client
        .delete(app.url(&format!("/v1/admin/users/{email}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn admin_lists_accounts_in_pages_oldest_first() {
    let app = TestApp::with_auth().await;
    let token = admin(&app, "root@example.com").await;
    for n in 0..3 {
        app.user(&format!("u{n}@example.com")).await;
    }
    let page = body(
        app.get("/v1/admin/users?limit=2&offset=1", Some(&token))
            .await,
    )
    .await;
    assert_eq!(page["total"], 4, "{page}");
    let emails: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["email"].as_str().unwrap())
        .collect();
    assert_eq!(emails, ["u0@example.com", "u1@example.com"]);
    let first = &page["items"][0];
    assert_eq!(
        (
            &first["role"],
            &first["limit"],
            &first["used"],
            &first["remaining"]
        ),
        (&json!("user"), &json!(100), &json!(0), &json!(100)),
        "{first}"
    );
    let all = body(app.get("/v1/admin/users", Some(&token)).await).await;
    assert_eq!(all["items"][0]["email"], "root@example.com");
    assert_eq!(all["items"][0]["limit"], -1, "admins are unlimited");
    expect_error(
        app.get("/v1/admin/users?limit=-1", Some(&token)).await,
        400,
        "invalid_request",
    )
    .await;
}

#[tokio::test]
async fn non_admins_are_forbidden_and_anonymous_callers_unauthorized() {
    let app = TestApp::with_auth().await;
    let user = app.user("plain@example.com").await;
    expect_error(
        app.get("/v1/admin/users", Some(&user)).await,
        403,
        "forbidden",
    )
    .await;
    expect_error(
        patch(&app, &user, "plain@example.com", &json!({"limit": -1})).await,
        403,
        "forbidden",
    )
    .await;
    expect_error(
        delete(&app, &user, "plain@example.com").await,
        403,
        "forbidden",
    )
    .await;
    expect_error(app.get("/v1/admin/users", None).await, 401, "unauthorized").await;
    // Nothing changed: the user is still limited.
    assert_eq!(body(app.me(Some(&user)).await).await["limit"], 100);
}

#[tokio::test]
async fn admin_changes_limit_role_and_usage_as_the_cli_does() {
    let app = TestApp::with_auth().await;
    let token = admin(&app, "root@example.com").await;
    let user = app.user("bob@example.com").await;
    app.state
        .auth()
        .unwrap()
        .admit_leg(
            &app.state
                .auth()
                .unwrap()
                .user_by_email("bob@example.com")
                .await
                .unwrap()
                .unwrap()
                .0
                .id,
        )
        .await
        .unwrap();
    assert_eq!(body(app.me(Some(&user)).await).await["used"], 1);

    let r = patch(&app, &token, "bob@example.com", &json!({"limit": 7})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let b = body(r).await;
    assert_eq!(
        (&b["ok"], &b["user"]["limit"], &b["user"]["remaining"]),
        (&json!(true), &json!(7), &json!(6))
    );
    let me = body(app.me(Some(&user)).await).await;
    assert_eq!(
        (&me["limit"], &me["used"], &me["remaining"]),
        (&json!(7), &json!(1), &json!(6))
    );

    let b = body(
        patch(
            &app,
            &token,
            "BOB@example.com",
            &json!({"reset_usage": true}),
        )
        .await,
    )
    .await;
    assert_eq!(
        b["user"]["used"], 0,
        "emails are matched case-insensitively: {b}"
    );
    assert_eq!(body(app.me(Some(&user)).await).await["used"], 0);

    patch(&app, &token, "bob@example.com", &json!({"role": "admin"})).await;
    let me = body(app.me(Some(&user)).await).await;
    assert_eq!((&me["role"], &me["limit"]), (&json!("admin"), &json!(-1)));
    // The promoted account may now administer too.
    assert_eq!(
        app.get("/v1/admin/users", Some(&user)).await.status(),
        StatusCode::OK
    );

    expect_error(
        patch(&app, &token, "bob@example.com", &json!({"role": "god"})).await,
        400,
        "invalid_request",
    )
    .await;
    expect_error(
        patch(&app, &token, "bob@example.com", &json!({"limit": -2})).await,
        400,
        "invalid_request",
    )
    .await;
    expect_error(
        patch(&app, &token, "nobody@example.com", &json!({"limit": 1})).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn admin_deletes_an_account_its_sessions_and_its_notes() {
    let app = TestApp::with_auth().await;
    let token = admin(&app, "root@example.com").await;
    let user = app.user("gone@example.com").await;
    let r = app
        .post(
            "/v1/memory/remember",
            Some(&user),
            &json!({"project_id": "p1", "note": "keep me"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let id = app
        .state
        .auth()
        .unwrap()
        .user_by_email("gone@example.com")
        .await
        .unwrap()
        .unwrap()
        .0
        .id;

    let r = delete(&app, &token, "gone@example.com").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(r).await["user"]["email"], "gone@example.com");

    expect_error(app.me(Some(&user)).await, 401, "unauthorized").await;
    let (total, _) = app
        .state
        .memory()
        .list_notes(&id, None, 10, 0)
        .await
        .unwrap();
    assert_eq!(total, 0, "the account's notes went with it");
    let list = body(app.get("/v1/admin/users", Some(&token)).await).await;
    assert_eq!(list["total"], 1);
    expect_error(
        delete(&app, &token, "gone@example.com").await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn open_mode_has_no_accounts_to_manage() {
    let app = TestApp::open().await;
    let list = body(app.get("/v1/admin/users", None).await).await;
    assert_eq!(list, json!({"total": 0, "items": []}));
    expect_error(
        app.client
            .patch(app.url("/v1/admin/users/a@example.com"))
            .json(&json!({"limit": 1}))
            .send()
            .await
            .unwrap(),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn the_last_admin_cannot_demote_or_delete_themselves() {
    let app = TestApp::with_auth().await;
    let token = admin(&app, "root@example.com").await;
    let r = patch(&app, &token, "root@example.com", &json!({"role": "user"})).await;
    let b = expect_error(r, 409, "last_admin").await;
    assert!(b["message"].as_str().unwrap().contains("last admin"), "{b}");
    expect_error(
        delete(&app, &token, "root@example.com").await,
        409,
        "last_admin",
    )
    .await;
    // Still an admin, still there.
    assert_eq!(body(app.me(Some(&token)).await).await["role"], "admin");

    // With a second admin, the first may step down.
    let other = admin(&app, "second@example.com").await;
    let r = patch(&app, &token, "root@example.com", &json!({"role": "user"})).await;
    assert_eq!(r.status(), StatusCode::OK);
    // Now the second is the last one.
    expect_error(
        delete(&app, &other, "second@example.com").await,
        409,
        "last_admin",
    )
    .await;
}

#[tokio::test]
async fn api_errors_name_the_api_field_not_the_cli_flag() {
    let app = TestApp::with_auth().await;
    let token = admin(&app, "root@example.com").await;
    app.user("bob@example.com").await;
    let r = patch(&app, &token, "bob@example.com", &json!({"limit": -5})).await;
    let b = expect_error(r, 400, "invalid_request").await;
    let message = b["message"].as_str().unwrap();
    assert!(message.starts_with("limit must be"), "{message}");
    assert!(!message.contains("--"), "{message}");
}
