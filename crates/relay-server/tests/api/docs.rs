//! The reference: every route is in `/openapi.json` and on `/docs`, and nothing else is routed
//! (spec §9 rule 5).
//!
//! How an undocumented route fails the suite: routes can only be registered through
//! `OpenApiRouter::routes(routes!(handler))`, which reads the handler's `#[utoipa::path]`.
//! `no_route_is_registered_outside_the_documented_route_list` fails if any source file adds a route
//! another way (`.route(`, `.route_service(`, `.nest(`, `.merge(`), and
//! `every_documented_operation_is_routed` fails if the document lists something the router lacks.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::helpers::{TestApp, body};

fn operations(doc: &Value) -> Vec<(String, String)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                ops.push((method.to_owned(), path.clone()));
            }
        }
    }
    ops
}

#[tokio::test]
async fn openapi_document_matches_the_snapshot() {
    let doc = relay_server::http::routes::openapi()
        .to_pretty_json()
        .unwrap();
    insta::assert_snapshot!("openapi", doc);
}

#[tokio::test]
async fn openapi_is_3_1_and_served_as_json() {
    let app = TestApp::open().await;
    let r = app.get("/openapi.json", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let doc = body(r).await;
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    assert!(operations(&doc).len() >= 10);
}

/// The page is Redoc drawing `/openapi.json`; every file it loads is served from the binary. The
/// browser tests (`tests/browser`) check that it shows every operation.
#[tokio::test]
async fn docs_page_loads_only_embedded_files() {
    let app = TestApp::open().await;
    let r = app.get("/docs", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.starts_with("default-src 'self'"), "{csp}");
    let html = r.text().await.unwrap();
    assert!(!html.contains("<script>"), "no inline script");
    for external in ["src=\"http", "href=\"http", "src=\"//", "href=\"//"] {
        assert!(
            !html.contains(external),
            "/docs loads something external: {external}"
        );
    }
    let mut loaded = 0;
    for part in html.split(['"', '\'']) {
        if part.starts_with("/docs/") {
            let r = app.get(part, None).await;
            assert_eq!(r.status(), StatusCode::OK, "{part}");
            assert!(!r.bytes().await.unwrap().is_empty(), "{part}");
            loaded += 1;
        }
    }
    assert!(loaded >= 2, "the page loads Redoc and its own script");
    let redoc = app
        .get("/docs/redoc.standalone.js", None)
        .await
        .text()
        .await
        .unwrap();
    assert!(redoc.contains("Redoc"), "the Redoc bundle is embedded");
    assert_eq!(
        app.get("/docs/nope.js", None).await.status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let app = TestApp::open().await;
    let doc = body(app.get("/openapi.json", None).await).await;
    for (method, path) in operations(&doc) {
        let concrete = path
            .replace("{id}", "mem%23local%23p%231")
            .replace("{email}", "a%40example.com")
            .replace("{file}", "favicon.svg");
        let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let r = app
            .client
            .request(m, app.url(&concrete))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let b = r.text().await.unwrap();
        assert!(
            !(status == StatusCode::NOT_FOUND && b.contains("no such endpoint"))
                && status != StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path} is documented but not routed ({status})"
        );
    }
}

#[test]
fn no_route_is_registered_outside_the_documented_route_list() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    let mut stack = vec![src];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    for call in [
                        ".route(",
                        ".route_service(",
                        ".nest(",
                        ".nest_service(",
                        ".merge(",
                    ] {
                        if code.contains(call) {
                            offenders.push(format!(
                                "{}:{}: {}",
                                path.display(),
                                n + 1,
                                line.trim()
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "routes must be added with `.routes(routes!(handler))` in routes.rs so they are documented:\n{}",
        offenders.join("\n")
    );
}
