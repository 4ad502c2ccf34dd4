//! `POST /v1/search` against fake servers that answer in each backend's real response shape.

use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use axum::routing::{get, post};
use relay_server::config::{SearchConfig, SearchKind};
use serde_json::{Value, json};

use crate::helpers::{TestApp, body, expect_error, open_config};

/// What the fake search server saw: path with query, and the headers that matter.
#[derive(Default, Clone)]
struct Seen(Arc<Mutex<Vec<(String, String, Value)>>>);

async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

fn header(h: &HeaderMap, name: &str) -> String {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn app_for(kind: SearchKind, base_url: String) -> TestApp {
    TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.search = Some(SearchConfig {
            kind,
            base_url: Some(base_url),
            api_key_env: None,
            timeout_ms: 2_000,
        });
        c
    })
    .await
}

struct KeyEnv;
impl relay_server::config::Env for KeyEnv {
    fn var(&self, name: &str) -> Option<String> {
        (name == "SEARCH_API_KEY").then(|| "search-key-123".to_owned())
    }
}

/// Brave and Tavily need a key from the environment.
async fn keyed_app(kind: SearchKind, base_url: String) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    let mut config = open_config(dir.path());
    config.search = Some(SearchConfig {
        kind,
        base_url: Some(base_url),
        api_key_env: Some("SEARCH_API_KEY".into()),
        timeout_ms: 2_000,
    });
    let stores = relay_server::Stores::open(&config).await.unwrap();
    let relay = relay_server::Relay::with_stores(config.clone(), stores, &KeyEnv).unwrap();
    TestApp::from_relay(relay, dir).await
}

#[tokio::test]
async fn searxng_results_are_normalised() {
    let seen = Seen::default();
    let s = seen.clone();
    let base = serve(axum::Router::new().route(
        "/search",
        get(move |uri: axum::http::Uri| {
            let s = s.clone();
            async move {
                s.0.lock().unwrap().push((uri.to_string(), String::new(), Value::Null));
                axum::Json(json!({
                    "query": "rust axum", "number_of_results": 0,
                    "results": [
                        {"url": "https://docs.rs/axum", "title": "axum - Rust", "content": "Web framework that focuses on <b>ergonomics</b>", "engine": "duckduckgo", "engines": ["duckduckgo"], "score": 1.0, "category": "general"},
                        {"url": "https://github.com/tokio-rs/axum", "title": "tokio-rs/axum", "content": "", "engine": "google", "score": 0.5, "category": "general"},
                        {"url": "javascript:alert(1)", "title": "bad", "content": "x"}
                    ],
                    "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []
                }))
            }
        }),
    ))
    .await;
    let app = app_for(SearchKind::Searxng, base).await;
    let r = app
        .post("/v1/search", None, &json!({"query": "rust axum"}))
        .await;
    let b = body(r).await;
    assert_eq!(
        b,
        json!({"results": [
            {"title": "axum - Rust", "url": "https://docs.rs/axum", "snippet": "Web framework that focuses on ergonomics"},
            {"title": "tokio-rs/axum", "url": "https://github.com/tokio-rs/axum", "snippet": ""}
        ]})
    );
    let uri = seen.0.lock().unwrap()[0].0.clone();
    assert!(
        uri.contains("q=rust+axum") && uri.contains("format=json"),
        "{uri}"
    );
}

#[tokio::test]
async fn brave_results_are_normalised_and_limited() {
    let seen = Seen::default();
    let s = seen.clone();
    let items: Vec<Value> = (0..12)
        .map(|i| json!({"title": format!("Result {i}"), "url": format!("https://example.com/{i}"),
                        "description": format!("The <strong>Rust</strong> book &amp; more {}", "x".repeat(600)),
                        "is_source_local": false, "language": "en", "profile": {"name": "Example"}}))
        .collect();
    let base = serve(axum::Router::new().route(
        "/res/v1/web/search",
        get(move |uri: axum::http::Uri, h: HeaderMap| {
            let (s, items) = (s.clone(), items.clone());
            async move {
                s.0.lock().unwrap().push((uri.to_string(), header(&h, "x-subscription-token"), Value::Null));
                axum::Json(json!({"type": "search", "query": {"original": "rust"}, "mixed": {}, "web": {"type": "search", "results": items}}))
            }
        }),
    ))
    .await;
    let app = keyed_app(SearchKind::Brave, base).await;
    let b = body(
        app.post("/v1/search", None, &json!({"query": "rust", "limit": 3}))
            .await,
    )
    .await;
    let results = b["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    let snippet = results[0]["snippet"].as_str().unwrap();
    assert!(snippet.starts_with("The Rust book & more "), "{snippet}");
    assert_eq!(snippet.chars().count(), 500);
    let b = body(
        app.post("/v1/search", None, &json!({"query": "rust", "limit": 50}))
            .await,
    )
    .await;
    assert_eq!(
        b["results"].as_array().unwrap().len(),
        10,
        "limit is capped at 10"
    );
    let (uri, key, _) = seen.0.lock().unwrap()[0].clone();
    assert_eq!(key, "search-key-123");
    assert!(uri.contains("count=3"), "{uri}");
}

#[tokio::test]
async fn tavily_results_are_normalised() {
    let seen = Seen::default();
    let s = seen.clone();
    let base = serve(axum::Router::new().route(
        "/search",
        post(move |h: HeaderMap, axum::Json(req): axum::Json<Value>| {
            let s = s.clone();
            async move {
                s.0.lock().unwrap().push((String::new(), header(&h, "authorization"), req));
                axum::Json(json!({"query": "q", "follow_up_questions": null, "answer": null, "images": [],
                    "results": [{"title": "Tokio", "url": "https://tokio.rs", "content": "An asynchronous runtime", "score": 0.98, "raw_content": null}],
                    "response_time": 1.05}))
            }
        }),
    ))
    .await;
    let app = keyed_app(SearchKind::Tavily, base).await;
    let b = body(
        app.post("/v1/search", None, &json!({"query": "tokio runtime"}))
            .await,
    )
    .await;
    assert_eq!(
        b,
        json!({"results": [{"title": "Tokio", "url": "https://tokio.rs", "snippet": "An asynchronous runtime"}]})
    );
    let (_, auth, req) = seen.0.lock().unwrap()[0].clone();
    assert_eq!(auth, "Bearer search-key-123");
    assert_eq!(
        (req["query"].as_str(), req["max_results"].as_u64()),
        (Some("tokio runtime"), Some(5))
    );
}

#[tokio::test]
async fn without_a_backend_search_is_503_search_unavailable() {
    let app = TestApp::open().await;
    expect_error(
        app.post("/v1/search", None, &json!({"query": "x"})).await,
        503,
        "search_unavailable",
    )
    .await;
}

#[tokio::test]
async fn upstream_failures_map_to_the_contract_codes_and_bad_input_is_400() {
    let base = serve(
        axum::Router::new()
            .route(
                "/fail/search",
                get(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
            )
            .route(
                "/busy/search",
                get(|| async {
                    (
                        axum::http::StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "7")],
                        "slow down",
                    )
                }),
            )
            .route("/junk/search", get(|| async { "<html>not json</html>" })),
    )
    .await;
    let app = app_for(SearchKind::Searxng, format!("{base}/fail")).await;
    expect_error(
        app.post("/v1/search", None, &json!({"query": "x"})).await,
        502,
        "upstream_error",
    )
    .await;
    expect_error(
        app.post("/v1/search", None, &json!({"query": "  "})).await,
        400,
        "invalid_request",
    )
    .await;
    expect_error(
        app.post("/v1/search", None, &json!({"query": "x", "limit": 0}))
            .await,
        400,
        "invalid_request",
    )
    .await;
    let app = app_for(SearchKind::Searxng, format!("{base}/busy")).await;
    let r = app.post("/v1/search", None, &json!({"query": "x"})).await;
    assert_eq!(r.headers()["retry-after"], "7");
    expect_error(r, 429, "rate_limited").await;
    let app = app_for(SearchKind::Searxng, format!("{base}/junk")).await;
    expect_error(
        app.post("/v1/search", None, &json!({"query": "x"})).await,
        502,
        "upstream_error",
    )
    .await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let app = app_for(SearchKind::Searxng, format!("http://127.0.0.1:{port}")).await;
    expect_error(
        app.post("/v1/search", None, &json!({"query": "x"})).await,
        503,
        "search_unavailable",
    )
    .await;
}
