//! Signup, signin, signout, `/v1/me`, open mode and the waitlist (spec §4.1, §5; CONTRACT.md).

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, body, expect_error};

#[tokio::test]
async fn signup_me_signout_me_is_the_whole_session_flow() {
    let app = TestApp::with_auth().await;
    let r = app
        .signup("  Ada@Example.com ", "correct horse battery")
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let session = body(r).await;
    let token = session["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("rly_") && token.len() == 47, "{token}");
    assert_eq!(session["email"], "ada@example.com");
    assert_eq!(session["role"], "user");
    assert_eq!(session["limit"], 100);

    let mut me = body(app.me(Some(&token)).await).await;
    // The month's end moves with the clock: checked for its shape, then set aside.
    for at in ["quota_resets_at", "tokens_resets_at"] {
        let t = me.as_object_mut().unwrap().remove(at).unwrap();
        assert!(t.as_str().unwrap().ends_with("-01T00:00:00Z"), "{t}");
    }
    assert_eq!(
        me,
        json!({"auth": true, "role": "user", "email": "ada@example.com", "limit": 100, "used": 0, "remaining": 100,
            "token_budget": -1, "tokens_used": 0, "tokens_remaining": -1, "quota_period": "month",
            "spend_budget_usd": -1.0, "spend_used_usd": 0.0, "allowed_models": null})
    );

    let r = app.post("/v1/auth/signout", Some(&token), &json!({})).await;
    assert_eq!(body(r).await, json!({"ok": true}));
    expect_error(app.me(Some(&token)).await, 401, "unauthorized").await;

    // Signin gives a fresh, working token.
    let r = app.signin("ada@example.com", "correct horse battery").await;
    assert_eq!(r.status(), StatusCode::OK);
    let token2 = body(r).await["token"].as_str().unwrap().to_owned();
    assert_ne!(token, token2);
    assert_eq!(app.me(Some(&token2)).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn only_the_token_hash_is_stored() {
    let app = TestApp::with_auth().await;
    let token = app.user("hash@example.com").await;
    if crate::helpers::on_postgres() {
        // No database file to read: every row of every table, as text, must lack the token.
        let pool = app.pg_pool().await;
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        assert!(tables.iter().any(|t| t == "sessions"), "{tables:?}");
        for t in &tables {
            let hits: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM \"{t}\" AS r WHERE strpos(row_to_json(r)::text, $1) > 0"
            )))
            .bind(&token)
            .fetch_one(&pool)
            .await
            .unwrap();
            assert_eq!(hits, 0, "the raw token is in table {t}");
        }
        let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(sessions, 1, "the session is stored, as its hash");
        return;
    }
    let db = std::fs::read(app.dir.path().join("relay.db")).unwrap();
    let wal = std::fs::read(app.dir.path().join("relay.db-wal")).unwrap_or_default();
    let needle = token.as_bytes();
    let found = |hay: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    assert!(
        !found(&db) && !found(&wal),
        "the raw token is in the database file"
    );
}

#[tokio::test]
async fn signout_is_ok_without_or_with_a_bad_token() {
    let app = TestApp::with_auth().await;
    for token in [None, Some("rly_nonsense")] {
        let r = app.post("/v1/auth/signout", token, &json!({})).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(body(r).await, json!({"ok": true}));
    }
}

#[tokio::test]
async fn signup_with_a_taken_email_is_409_email_taken() {
    let app = TestApp::with_auth().await;
    app.user("taken@example.com").await;
    expect_error(
        app.signup("TAKEN@example.com", "another password").await,
        409,
        "email_taken",
    )
    .await;
}

#[tokio::test]
async fn wrong_password_and_unknown_email_are_the_same_401() {
    let app = TestApp::with_auth().await;
    app.user("known@example.com").await;
    let wrong = expect_error(
        app.signin("known@example.com", "not the password").await,
        401,
        "invalid_credentials",
    )
    .await;
    let unknown = expect_error(
        app.signin("nobody@example.com", "not the password").await,
        401,
        "invalid_credentials",
    )
    .await;
    assert_eq!(wrong, unknown, "the two answers must not differ");
}

#[tokio::test]
async fn an_expired_token_is_401() {
    let app = TestApp::with_auth().await;
    app.user("old@example.com").await;
    let auth = app.state.auth().unwrap();
    let (user, _) = auth
        .user_by_email("old@example.com")
        .await
        .unwrap()
        .unwrap();
    let token = relay_server::accounts::new_token();
    let now = relay_server::clock::now();
    auth.create_session(
        &relay_server::accounts::token_hash(&token),
        &user.id,
        now - 100.0,
        now - 1.0,
    )
    .await
    .unwrap();
    expect_error(app.me(Some(&token)).await, 401, "unauthorized").await;
}

#[tokio::test]
async fn me_without_a_valid_token_is_401() {
    let app = TestApp::with_auth().await;
    expect_error(app.me(None).await, 401, "unauthorized").await;
    expect_error(app.me(Some("rly_forged")).await, 401, "unauthorized").await;
    let r = app
        .client
        .get(app.url("/v1/me"))
        .header("authorization", "Basic dXNlcjpwYXNz")
        .send()
        .await
        .unwrap();
    expect_error(r, 401, "unauthorized").await;
}

#[tokio::test]
async fn bad_email_or_password_is_400_invalid_request() {
    let app = TestApp::with_auth().await;
    for (email, password, mentions) in [
        ("no-at-sign", "long enough pw", "email"),
        ("a@nodot", "long enough pw", "email"),
        ("@example.com", "long enough pw", "email"),
        ("ok@example.com", "short", "password"),
    ] {
        for path in ["/v1/auth/signup", "/v1/auth/signin"] {
            let r = app
                .post(path, None, &json!({"email": email, "password": password}))
                .await;
            let b = expect_error(r, 400, "invalid_request").await;
            assert!(
                b["message"].as_str().unwrap().contains(mentions),
                "{path} {email}: {b}"
            );
        }
    }
    let long = "x".repeat(257);
    expect_error(
        app.signup("ok@example.com", &long).await,
        400,
        "invalid_request",
    )
    .await;
}

#[tokio::test]
async fn malformed_bodies_are_400_naming_the_field() {
    let app = TestApp::with_auth().await;
    let b = expect_error(
        app.post("/v1/auth/signup", None, &json!({"email": "a@b.co"}))
            .await,
        400,
        "invalid_request",
    )
    .await;
    assert!(b["message"].as_str().unwrap().contains("password"), "{b}");
    let b = expect_error(
        app.post(
            "/v1/auth/signup",
            None,
            &json!({"email": 5, "password": "long enough pw"}),
        )
        .await,
        400,
        "invalid_request",
    )
    .await;
    assert!(b["message"].as_str().unwrap().contains("email"), "{b}");
    let b = expect_error(
        app.post_raw("/v1/auth/signin", "{not json").await,
        400,
        "invalid_request",
    )
    .await;
    assert!(b["message"].as_str().unwrap().contains("JSON"), "{b}");
    expect_error(
        app.post_raw("/v1/auth/signin", "").await,
        400,
        "invalid_request",
    )
    .await;
    expect_error(
        app.post_raw("/v1/auth/signin", "[1,2]").await,
        400,
        "invalid_request",
    )
    .await;
}

#[tokio::test]
async fn signin_is_throttled_after_the_failure_budget_with_retry_after() {
    let app = TestApp::with_auth().await;
    app.user("target@example.com").await;
    for i in 0..10 {
        let r = app.signin("target@example.com", "wrong password!").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "attempt {i}");
    }
    let r = app.signin("target@example.com", "wrong password!").await;
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1, "{retry}");
    expect_error(r, 429, "rate_limited").await;
    // While locked, even the right password is refused, so a lucky guess is not revealed.
    expect_error(
        app.signin("target@example.com", "correct horse battery")
            .await,
        429,
        "rate_limited",
    )
    .await;
    // The same address is locked for other emails too (per-address budget).
    expect_error(
        app.signin("other@example.com", "whatever pw").await,
        429,
        "rate_limited",
    )
    .await;
}

#[tokio::test]
async fn successful_signins_do_not_spend_the_failure_budget() {
    let app = TestApp::with_auth().await;
    app.user("busy@example.com").await;
    for _ in 0..15 {
        assert_eq!(
            app.signin("busy@example.com", "correct horse battery")
                .await
                .status(),
            StatusCode::OK
        );
    }
}

#[tokio::test]
async fn user_id_in_a_body_or_query_never_changes_identity() {
    let app = TestApp::with_auth().await;
    let a = app.user("a@example.com").await;
    app.user("b@example.com").await;
    let me = body(app.get("/v1/me?user_id=someone-else", Some(&a)).await).await;
    assert_eq!(me["email"], "a@example.com");
    let r = app
        .post(
            "/v1/auth/signin",
            None,
            &json!({"email": "a@example.com", "password": "correct horse battery", "user_id": "b"}),
        )
        .await;
    let token = body(r).await["token"].as_str().unwrap().to_owned();
    assert_eq!(
        body(app.me(Some(&token)).await).await["email"],
        "a@example.com"
    );
}

#[tokio::test]
async fn closed_signups_are_403_signup_closed() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = crate::helpers::auth_config(dir);
        c.auth.as_mut().unwrap().signup = relay_server::config::SignupMode::Closed;
        c
    })
    .await;
    expect_error(
        app.signup("new@example.com", "long enough pw").await,
        403,
        "signup_closed",
    )
    .await;
}

#[tokio::test]
async fn open_mode_ignores_tokens_and_answers_local() {
    let app = TestApp::open().await;
    let expected = json!({"auth": false, "role": "local", "email": "", "limit": -1, "used": 0, "remaining": -1,
        "token_budget": -1, "tokens_used": 0, "tokens_remaining": -1, "quota_period": "never",
        "quota_resets_at": null, "spend_budget_usd": -1.0, "spend_used_usd": 0.0, "allowed_models": null});
    for token in [None, Some("rly_garbage"), Some("anything")] {
        let r = app.me(token).await;
        assert_eq!(r.status(), StatusCode::OK);
        let mut me = body(r).await;
        let at = me
            .as_object_mut()
            .unwrap()
            .remove("tokens_resets_at")
            .unwrap();
        assert!(at.as_str().unwrap().ends_with("-01T00:00:00Z"), "{at}");
        assert_eq!(me, expected);
    }
    // An unchanged client can still sign in; its token is accepted and ignored.
    for path in ["/v1/auth/signin", "/v1/auth/signup"] {
        let r = app
            .post(
                path,
                None,
                &json!({"email": "me@example.com", "password": "whatever pw"}),
            )
            .await;
        assert_eq!(r.status(), StatusCode::OK);
        let s = body(r).await;
        assert!(s["token"].as_str().unwrap().starts_with("rly_"));
        assert_eq!(s["role"], "local");
        assert_eq!(app.me(s["token"].as_str()).await.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn waitlist_is_stored_once_and_never_tells_who_is_on_it() {
    let app = TestApp::open().await;
    for _ in 0..2 {
        let r = app
            .post(
                "/v1/waitlist",
                None,
                &json!({"email": "Fan@Example.com", "source": "hn"}),
            )
            .await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(body(r).await, json!({"ok": true}));
    }
    let r = app
        .post("/v1/waitlist", None, &json!({"email": "new@example.com"}))
        .await;
    assert_eq!(body(r).await, json!({"ok": true}));
    expect_error(
        app.post("/v1/waitlist", None, &json!({"email": "nope"}))
            .await,
        400,
        "invalid_request",
    )
    .await;
    let long = "s".repeat(65);
    expect_error(
        app.post(
            "/v1/waitlist",
            None,
            &json!({"email": "x@example.com", "source": long}),
        )
        .await,
        400,
        "invalid_request",
    )
    .await;

    let query = "SELECT email, source FROM waitlist ORDER BY email";
    let rows: Vec<(String, String)> = if crate::helpers::on_postgres() {
        sqlx::query_as(query)
            .fetch_all(&app.pg_pool().await)
            .await
            .unwrap()
    } else {
        let pool = sqlx::SqlitePool::connect(&format!(
            "sqlite://{}",
            app.dir.path().join("relay.db").display()
        ))
        .await
        .unwrap();
        sqlx::query_as(query).fetch_all(&pool).await.unwrap()
    };
    assert_eq!(
        rows,
        vec![
            ("fan@example.com".into(), "hn".into()),
            ("new@example.com".into(), "web".into())
        ]
    );
}

/// Sets the account's `used` in the store, as another instance's legs would.
async fn set_used_in_store(app: &TestApp, email: &str, used: i64) {
    if crate::helpers::on_postgres() {
        sqlx::query("UPDATE users SET used = $1 WHERE email = $2")
            .bind(used)
            .bind(email)
            .execute(&app.pg_pool().await)
            .await
            .unwrap();
        return;
    }
    let url = format!("sqlite://{}", app.dir.path().join("relay.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("UPDATE users SET used = ? WHERE email = ?")
        .bind(used)
        .bind(email)
        .execute(&pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_signout_ends_a_cached_session_at_the_next_request() {
    let app = TestApp::with_auth().await;
    let token = app.user("cached@example.com").await;
    let other = body(
        app.signin("cached@example.com", "correct horse battery")
            .await,
    )
    .await;
    let other = other["token"].as_str().unwrap().to_owned();
    // Seen twice, so the session is served from the cache when it is signed out.
    for _ in 0..2 {
        let r = app.get("/v1/memory/list?project_id=p", Some(&token)).await;
        assert_eq!(r.status(), StatusCode::OK);
    }
    let r = app.post("/v1/auth/signout", Some(&token), &json!({})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = app.get("/v1/memory/list?project_id=p", Some(&token)).await;
    expect_error(r, 401, "unauthorized").await;
    let r = app.get("/v1/memory/list?project_id=p", Some(&other)).await;
    assert_eq!(
        r.status(),
        StatusCode::OK,
        "the account's other session stays"
    );
}

#[tokio::test]
async fn me_shows_the_stored_usage_while_the_session_is_cached() {
    let app = TestApp::with_auth().await;
    let token = app.user("usage@example.com").await;
    for _ in 0..2 {
        let r = app.get("/v1/memory/list?project_id=p", Some(&token)).await;
        assert_eq!(r.status(), StatusCode::OK);
    }
    assert_eq!(body(app.me(Some(&token)).await).await["used"], 0);
    set_used_in_store(&app, "usage@example.com", 7).await;
    // The session is still cached (no change it depends on), yet `used` is the store's.
    let r = app.get("/v1/memory/list?project_id=p", Some(&token)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let me = body(app.me(Some(&token)).await).await;
    assert_eq!(
        (me["used"].as_i64(), me["remaining"].as_i64()),
        (Some(7), Some(93))
    );
}
