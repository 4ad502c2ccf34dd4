//! Managed settings for agents (issue 40): `GET /managed/settings` with its checksum, ETag and
//! 304, the shared document and per-account ones, and the admin endpoints. Runs on both stores.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::{TestApp, body, expect_error};

async fn admin(app: &TestApp) -> String {
    let token = app.user("root@example.com").await;
    relay_server::operator::set_user(
        app.state.auth().unwrap().as_ref(),
        "root@example.com",
        relay_server::operator::parse_changes(Some("admin"), None, false).unwrap(),
    )
    .await
    .unwrap();
    token
}

async fn put(app: &TestApp, token: &str, path: &str, doc: &Value) -> reqwest::Response {
    app.client
        .put(app.url(path))
        .bearer_auth(token)
        .json(doc)
        .send()
        .await
        .unwrap()
}

async fn delete(app: &TestApp, token: &str, path: &str) -> reqwest::Response {
    app.client
        .delete(app.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

async fn managed(app: &TestApp, token: &str, etag: Option<&str>) -> reqwest::Response {
    let mut r = app
        .client
        .get(app.url("/managed/settings"))
        .bearer_auth(token);
    if let Some(e) = etag {
        r = r.header("if-none-match", e);
    }
    r.send().await.unwrap()
}

#[tokio::test]
async fn the_shared_document_reaches_every_account_with_checksum_and_etag() {
    let app = TestApp::with_auth().await;
    let root = admin(&app).await;
    let ada = app.user("ada@example.com").await;
    assert_eq!(
        managed(&app, &ada, None).await.status(),
        StatusCode::NOT_FOUND
    );

    let doc = json!({"permissions": {"deny": ["Bash(rm:*)"]}, "env": {"ZED": "1", "ALPHA": "x"}});
    let r = put(&app, &root, "/v1/admin/agent-settings", &doc).await;
    assert_eq!(r.status(), StatusCode::OK);
    let stored = body(r).await;
    // What Claude Code computes: sorted keys at every level, no whitespace.
    let canonical = r#"{"env":{"ALPHA":"x","ZED":"1"},"permissions":{"deny":["Bash(rm:*)"]}}"#;
    let checksum = format!("sha256:{}", hex::encode(Sha256::digest(canonical)));
    assert_eq!(stored["checksum"], checksum.as_str());

    let r = managed(&app, &ada, None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["etag"], format!("\"{checksum}\"").as_str());
    let got = body(r).await;
    assert_eq!(got["settings"], doc);
    assert_eq!(got["checksum"], checksum.as_str());
    assert_eq!(got["uuid"], stored["uuid"]);

    let r = managed(&app, &ada, Some(&format!("\"{checksum}\""))).await;
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(r.text().await.unwrap(), "");
    // `*` asks only whether there are settings: answered as without the header.
    assert_eq!(
        managed(&app, &ada, Some("*")).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        managed(&app, &ada, Some("\"sha256:old\"")).await.status(),
        StatusCode::OK
    );

    // An edit keeps the uuid and moves the checksum.
    let r = put(&app, &root, "/v1/admin/agent-settings", &json!({"env": {}})).await;
    let edited = body(r).await;
    assert_eq!(edited["uuid"], stored["uuid"]);
    assert_ne!(edited["checksum"], stored["checksum"]);
    assert_eq!(
        managed(&app, &ada, Some(&format!("\"{checksum}\"")))
            .await
            .status(),
        StatusCode::OK
    );

    // An empty policy is not "no policy".
    put(&app, &root, "/v1/admin/agent-settings", &json!({})).await;
    let r = managed(&app, &ada, None).await;
    assert_eq!(body(r).await["settings"], json!({}));
    assert_eq!(
        delete(&app, &root, "/v1/admin/agent-settings")
            .await
            .status(),
        200
    );
    assert_eq!(
        managed(&app, &ada, None).await.status(),
        StatusCode::NOT_FOUND
    );
    expect_error(
        delete(&app, &root, "/v1/admin/agent-settings").await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn an_accounts_own_document_replaces_the_shared_one() {
    let app = TestApp::with_auth().await;
    let root = admin(&app).await;
    let ada = app.user("ada@example.com").await;
    let bob = app.user("bob@example.com").await;
    put(
        &app,
        &root,
        "/v1/admin/agent-settings",
        &json!({"env": {"TEAM": "all"}}),
    )
    .await;
    let r = put(
        &app,
        &root,
        "/v1/admin/users/ada@example.com/agent-settings",
        &json!({"env": {"TEAM": "ada"}}),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        body(managed(&app, &ada, None).await).await["settings"]["env"]["TEAM"],
        "ada"
    );
    assert_eq!(
        body(managed(&app, &bob, None).await).await["settings"]["env"]["TEAM"],
        "all"
    );
    let own = body(
        app.get(
            "/v1/admin/users/ada@example.com/agent-settings",
            Some(&root),
        )
        .await,
    )
    .await;
    assert_eq!(own["settings"]["env"]["TEAM"], "ada");
    assert_eq!(
        delete(
            &app,
            &root,
            "/v1/admin/users/ada@example.com/agent-settings"
        )
        .await
        .status(),
        200
    );
    assert_eq!(
        body(managed(&app, &ada, None).await).await["settings"]["env"]["TEAM"],
        "all"
    );
    expect_error(
        put(
            &app,
            &root,
            "/v1/admin/users/nobody@example.com/agent-settings",
            &json!({}),
        )
        .await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn only_admins_set_documents_and_only_objects() {
    let app = TestApp::with_auth().await;
    let root = admin(&app).await;
    let ada = app.user("ada@example.com").await;
    expect_error(
        put(&app, &ada, "/v1/admin/agent-settings", &json!({})).await,
        403,
        "forbidden",
    )
    .await;
    expect_error(
        app.get("/v1/admin/agent-settings", Some(&ada)).await,
        403,
        "forbidden",
    )
    .await;
    expect_error(
        app.get("/v1/admin/agent-settings", Some(&root)).await,
        404,
        "not_found",
    )
    .await;
    let r = app
        .client
        .put(app.url("/v1/admin/agent-settings"))
        .bearer_auth(&root)
        .header("content-type", "application/json")
        .body("[1, 2]")
        .send()
        .await
        .unwrap();
    expect_error(r, 400, "invalid_request").await;
}

#[tokio::test]
async fn a_revoked_token_gets_anthropics_401_there() {
    let app = TestApp::with_auth().await;
    let r = app.get("/managed/settings", Some("rly_revoked")).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers()["x-should-retry"], "false");
    assert_eq!(body(r).await["error"]["type"], "authentication_error");
}
