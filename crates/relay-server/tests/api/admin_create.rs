//! An admin creates accounts and searches them by email over HTTP (issue 42), as `relay users add`
//! does and as the console's Users view asks; on either store.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, body, expect_error};

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

fn emails(page: &Value) -> Vec<&str> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["email"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn an_admin_creates_an_account_with_its_role_limit_and_budget_and_its_owner_signs_in() {
    let app = TestApp::with_auth().await;
    let root = admin(&app, "root@example.com").await;
    let made = body(
        app.post(
            "/v1/admin/users",
            Some(&root),
            &json!({"email": "Bob@Example.com", "password": "a fine password", "limit": 12, "token_budget": 3000}),
        )
        .await,
    )
    .await;
    assert_eq!(made["ok"], true);
    assert_eq!(made["user"]["email"], "bob@example.com");
    assert_eq!(made["user"]["role"], "user");
    assert_eq!(made["user"]["limit"], 12);
    assert_eq!(made["user"]["used"], 0);
    let r = app.signin("bob@example.com", "a fine password").await;
    assert_eq!(r.status(), StatusCode::OK);
    let bob = body(r).await["token"].as_str().unwrap().to_owned();
    let me = body(app.me(Some(&bob)).await).await;
    assert_eq!(
        (me["limit"].as_i64(), me["token_budget"].as_i64()),
        (Some(12), Some(3000)),
        "{me}"
    );

    // An admin, with the defaults for what is not given.
    let made = body(
        app.post(
            "/v1/admin/users",
            Some(&root),
            &json!({"email": "cat@example.com", "password": "another password", "role": "admin"}),
        )
        .await,
    )
    .await;
    assert_eq!(
        (
            made["user"]["role"].as_str(),
            made["user"]["limit"].as_i64()
        ),
        (Some("admin"), Some(-1))
    );

    expect_error(
        app.post(
            "/v1/admin/users",
            Some(&root),
            &json!({"email": "bob@example.com", "password": "whatever pass"}),
        )
        .await,
        409,
        "email_taken",
    )
    .await;
    // Each bad field is named, and nothing is created for it.
    for (bad, field) in [
        (
            json!({"email": "not-an-email", "password": "a fine password"}),
            "email",
        ),
        (
            json!({"email": "d@example.com", "password": "short"}),
            "password",
        ),
        (
            json!({"email": "d@example.com", "password": "a fine password", "role": "king"}),
            "role",
        ),
        (
            json!({"email": "d@example.com", "password": "a fine password", "limit": -2}),
            "limit",
        ),
        (
            json!({"email": "d@example.com", "password": "a fine password", "token_budget": -5}),
            "token_budget",
        ),
    ] {
        let e = expect_error(
            app.post("/v1/admin/users", Some(&root), &bad).await,
            400,
            "invalid_request",
        )
        .await;
        assert!(
            e["message"].as_str().unwrap().contains(field),
            "{field}: {e}"
        );
    }
    expect_error(
        app.post(
            "/v1/admin/users",
            Some(&root),
            &json!({"email": "d@example.com", "password": "a fine password", "extra": 1}),
        )
        .await,
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(
        app.signin("d@example.com", "a fine password")
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );

    expect_error(
        app.post(
            "/v1/admin/users",
            Some(&bob),
            &json!({"email": "e@example.com", "password": "a fine password"}),
        )
        .await,
        403,
        "forbidden",
    )
    .await;
    assert_eq!(
        app.post(
            "/v1/admin/users",
            None,
            &json!({"email": "e@example.com", "password": "a fine password"})
        )
        .await
        .status(),
        StatusCode::UNAUTHORIZED
    );
    // A form post from a web page is refused before the handler.
    let r = app
        .client
        .post(app.url("/v1/admin/users"))
        .bearer_auth(&root)
        .header("content-type", "text/plain")
        .body(r#"{"email":"f@example.com","password":"a fine password"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn the_users_listing_searches_emails_in_any_case_and_counts_the_matches() {
    let app = TestApp::with_auth().await;
    let root = admin(&app, "root@example.com").await;
    for e in [
        "ann@alpha.io",
        "bob@beta.io",
        "anna@beta.io",
        "carl@alpha.io",
    ] {
        app.user(e).await;
    }
    let page = body(app.get("/v1/admin/users?q=ANN", Some(&root)).await).await;
    assert_eq!(page["total"], 2);
    assert_eq!(
        emails(&page),
        ["ann@alpha.io", "anna@beta.io"],
        "oldest first"
    );
    let page = body(
        app.get("/v1/admin/users?q=beta.io&limit=1&offset=1", Some(&root))
            .await,
    )
    .await;
    assert_eq!(page["total"], 2);
    assert_eq!(emails(&page), ["anna@beta.io"]);
    let page = body(app.get("/v1/admin/users?q=nobody", Some(&root)).await).await;
    assert_eq!((page["total"].as_i64(), emails(&page).len()), (Some(0), 0));
    // An empty search is the whole listing.
    let page = body(app.get("/v1/admin/users?q=", Some(&root)).await).await;
    assert_eq!(page["total"], 5);
}

#[tokio::test]
async fn open_mode_has_no_accounts_to_create() {
    let app = TestApp::open().await;
    expect_error(
        app.post(
            "/v1/admin/users",
            None,
            &json!({"email": "a@example.com", "password": "a fine password"}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
}
