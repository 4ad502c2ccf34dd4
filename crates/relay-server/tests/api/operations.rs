//! Health, readiness, metrics, error shapes and the headers every response carries.

use std::collections::HashMap;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, body, expect_error};

#[tokio::test]
async fn healthz_is_ok() {
    let app = TestApp::open().await;
    let r = app.get("/healthz", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(r).await, json!({"status": "ok"}));
}

#[tokio::test]
async fn readyz_checks_each_store() {
    let app = TestApp::with_auth().await;
    let r = app.get("/readyz", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let b = body(r).await;
    assert_eq!(b["status"], "ready");
    assert_eq!(b["checks"]["memory_store"]["status"], "ok");
    assert_eq!(b["checks"]["auth_store"]["status"], "ok");
}

#[tokio::test]
async fn readyz_is_503_with_detail_while_the_store_is_locked_and_recovers() {
    if crate::helpers::on_postgres() {
        // PostgreSQL has no file lock; tests/pg_restart.rs stops the server and checks /readyz.
        eprintln!("sqlite-only: locks the SQLite file");
        return;
    }
    let app = TestApp::spawn_with(|dir| {
        let mut c = crate::helpers::open_config(dir);
        c.memory.busy_timeout_ms = 200;
        c
    })
    .await;
    assert_eq!(app.get("/readyz", None).await.status(), StatusCode::OK);

    // Another process holds the database's write lock.
    let path = app.dir.path().join("relay.db");
    let mut locker = {
        use sqlx::ConnectOptions;
        sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .connect()
            .await
            .unwrap()
    };
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut locker)
        .await
        .unwrap();
    let r = app.get("/readyz", None).await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let b = body(r).await;
    assert_eq!(b["status"], "unready");
    assert_eq!(b["checks"]["memory_store"]["status"], "down");
    assert!(
        b["checks"]["memory_store"]["detail"].as_str().is_some(),
        "{b}"
    );

    sqlx::query("COMMIT").execute(&mut locker).await.unwrap();
    drop(locker);
    assert_eq!(app.get("/readyz", None).await.status(), StatusCode::OK);
}

/// A minimal reader of the Prometheus text format: every sample line is `name{labels} value`.
fn parse_prometheus(text: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    let mut typed = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            typed.insert(it.next().unwrap().to_owned());
            let kind = it.next().unwrap();
            assert!(
                ["counter", "gauge", "histogram", "summary", "unknown"].contains(&kind),
                "{line}"
            );
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad sample line: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value: {line}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name: {line}"
        );
        if let Some(labels) = series.strip_prefix(name)
            && !labels.is_empty()
        {
            assert!(
                labels.starts_with('{') && labels.ends_with('}'),
                "bad labels: {line}"
            );
        }
        let family = ["_total", "_bucket", "_sum", "_count", "_created"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        assert!(
            typed.contains(family) || typed.contains(name),
            "no # TYPE for {name}"
        );
        samples.insert(series.to_owned(), value);
    }
    samples
}

#[tokio::test]
async fn metrics_parse_and_count_requests_by_matched_route() {
    let app = TestApp::open().await;
    app.get("/healthz", None).await;
    let before = parse_prometheus(&app.get("/metrics", None).await.text().await.unwrap());
    let key = r#"relay_http_requests_total{method="GET",route="/healthz",status="200"}"#;
    let base = before.get(key).copied().unwrap_or(0.0);
    app.get("/healthz", None).await;
    app.get("/healthz", None).await;
    app.get("/no/such/path/42", None).await;
    let r = app.get("/metrics", None).await;
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = r.text().await.unwrap();
    let after = parse_prometheus(&text);
    assert_eq!(after[key], base + 2.0);
    assert!(text.contains(r#"route="unmatched""#));
    assert!(
        !text.contains("/no/such/path/42"),
        "raw paths must not become labels"
    );
    assert!(text.contains("relay_http_request_duration_seconds_bucket"));
}

#[tokio::test]
async fn framework_errors_use_the_error_shape() {
    let app = TestApp::open().await;
    expect_error(app.get("/nope", None).await, 404, "not_found").await;
    let r = app.client.delete(app.url("/healthz")).send().await.unwrap();
    expect_error(r, 405, "method_not_allowed").await;
    let big = vec![b' '; 1024 * 1024 + 10];
    expect_error(
        app.post_raw("/v1/waitlist", big).await,
        413,
        "payload_too_large",
    )
    .await;
}

#[tokio::test]
async fn every_response_has_a_request_id_and_nosniff_and_no_server_version() {
    let app = TestApp::open().await;
    for r in [
        app.get("/healthz", None).await,
        app.get("/missing", None).await,
    ] {
        let id = r.headers()["x-request-id"].to_str().unwrap();
        assert_eq!(id.len(), 32, "{id}");
        assert_eq!(r.headers()["x-content-type-options"], "nosniff");
        assert!(r.headers().get("server").is_none());
    }
    let r = app
        .client
        .get(app.url("/healthz"))
        .header("x-request-id", "client-chosen-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "client-chosen-1");
}

#[tokio::test]
async fn cors_is_closed_by_default_and_opens_for_configured_origins() {
    let app = TestApp::open().await;
    let r = app
        .client
        .get(app.url("/healthz"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());

    let app = TestApp::spawn_with(|dir| {
        let mut c = crate::helpers::open_config(dir);
        c.cors.allow_origins = vec!["https://app.example".into()];
        c
    })
    .await;
    let r = app
        .client
        .get(app.url("/healthz"))
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let r = app
        .client
        .get(app.url("/healthz"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

#[test]
fn open_mode_refuses_a_non_loopback_bind_unless_allowed() {
    let mut c = relay_server::Config {
        bind: "0.0.0.0:7711".parse().unwrap(),
        ..Default::default()
    };
    let err = relay_server::operator::check_open_bind(&c, false).unwrap_err();
    assert!(err.to_string().contains("--allow-open"), "{err}");
    assert!(relay_server::operator::check_open_bind(&c, true).is_ok());
    c.auth = Some(Default::default());
    assert!(relay_server::operator::check_open_bind(&c, false).is_ok());
    c.auth = None;
    c.bind = "127.0.0.1:7711".parse().unwrap();
    assert!(relay_server::operator::check_open_bind(&c, false).is_ok());
}

#[test]
fn startup_summary_redacts_store_credentials() {
    let mut c = relay_server::Config::default();
    c.memory.url = "postgres://relay:hunter2@db:5432/relay".into();
    let line = relay_server::operator::startup_summary(&c, c.bind, "demo");
    assert!(!line.contains("hunter2"), "{line}");
    assert!(
        line.contains("127.0.0.1:7711") && line.contains("OPEN MODE") && line.contains("demo"),
        "{line}"
    );
}
