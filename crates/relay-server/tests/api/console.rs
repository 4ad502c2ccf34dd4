//! The console's HTTP surface (issue 16): the page and its files come from the binary, under
//! `Content-Security-Policy: default-src 'self'`, with no inline script and nothing from another
//! host. What the page does is proven in Chromium by `tests/browser` (`scripts/browser-tests.sh`).

use reqwest::StatusCode;

use crate::helpers::{TestApp, auth_config};

fn csp(r: &reqwest::Response) -> String {
    r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn console_page_and_files_are_embedded_under_a_strict_policy() {
    let app = TestApp::with_auth().await;
    let r = app.get("/console", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(csp(&r).starts_with("default-src 'self'"), "{}", csp(&r));
    assert!(!csp(&r).contains("unsafe-inline"));
    let html = r.text().await.unwrap();
    assert!(html.contains("data-mode=\"accounts\""), "accounts mode");
    assert!(
        html.contains("data-signup=\"open\""),
        "signup open by default"
    );
    assert!(!html.contains("<script>"), "no inline script");
    assert!(!html.contains("style=\""), "no inline style");
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("\"//"));
    for (file, media) in [
        ("console.js", "text/javascript"),
        ("usage.js", "text/javascript"),
        ("requests.js", "text/javascript"),
        ("keys.js", "text/javascript"),
        ("admin.js", "text/javascript"),
        ("console.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        assert!(
            html.contains(&format!("/console/{file}")),
            "{file} is linked"
        );
        let r = app.get(&format!("/console/{file}"), None).await;
        assert_eq!(r.status(), StatusCode::OK, "{file}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(media)
        );
        assert!(csp(&r).starts_with("default-src 'self'"));
        let text = r.text().await.unwrap();
        assert!(!text.contains("https://"), "{file} names another host");
    }
    assert_eq!(
        app.get("/console/../Cargo.toml", None).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/console/secrets.txt", None).await.status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn console_page_tells_the_script_the_mode() {
    let open = TestApp::open().await;
    let html = open.get("/console", None).await.text().await.unwrap();
    assert!(html.contains("data-mode=\"open\""), "open mode has no form");

    let closed = TestApp::spawn_with(|dir| {
        let mut c = auth_config(dir);
        if let Some(a) = c.auth.as_mut() {
            a.signup = relay_server::config::SignupMode::Closed;
        }
        c
    })
    .await;
    let html = closed.get("/console", None).await.text().await.unwrap();
    assert!(
        html.contains("data-signup=\"closed\""),
        "no sign-up when closed"
    );
}
