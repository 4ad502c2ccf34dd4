//! The web console at `/console`: plain HTML, CSS and one script, embedded in the binary, so it
//! works offline and `cargo run -- serve` needs no front-end build.
//!
//! Every console response carries `Content-Security-Policy: default-src 'self'`: the page may load
//! only its own files and call only this service, and no inline script can run in it. The page
//! learns the mode (open or accounts, signup open or closed) from attributes filled in here, so it
//! never has to probe with a request that fails.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::config::SignupMode;
use crate::error::ApiError;
use crate::http::state::AppState;

/// Only this service, no inline script or style, not framable.
pub const CONSOLE_CSP: &str =
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX: &str = include_str!("../../assets/console/index.html");

/// An embedded file: its name under the route, media type and bytes.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

impl Asset {
    pub const fn script(name: &'static str, bytes: &'static [u8]) -> Self {
        Self::new(name, "text/javascript; charset=utf-8", bytes)
    }

    pub const fn stylesheet(name: &'static str, bytes: &'static [u8]) -> Self {
        Self::new(name, "text/css; charset=utf-8", bytes)
    }

    pub const fn svg(name: &'static str, bytes: &'static [u8]) -> Self {
        Self::new(name, "image/svg+xml", bytes)
    }

    const fn new(name: &'static str, content_type: &'static str, bytes: &'static [u8]) -> Self {
        Self {
            name,
            content_type,
            bytes,
        }
    }
}

const ASSETS: &[Asset] = &[
    Asset::script(
        "console.js",
        include_bytes!("../../assets/console/console.js"),
    ),
    Asset::script("usage.js", include_bytes!("../../assets/console/usage.js")),
    Asset::script(
        "requests.js",
        include_bytes!("../../assets/console/requests.js"),
    ),
    Asset::script("admin.js", include_bytes!("../../assets/console/admin.js")),
    Asset::script("keys.js", include_bytes!("../../assets/console/keys.js")),
    Asset::script(
        "device.js",
        include_bytes!("../../assets/console/device.js"),
    ),
    Asset::stylesheet(
        "console.css",
        include_bytes!("../../assets/console/console.css"),
    ),
    Asset::svg(
        "favicon.svg",
        include_bytes!("../../assets/console/favicon.svg"),
    ),
];

/// A response for an embedded file or page under the given Content-Security-Policy.
pub fn embedded(
    content_type: &'static str,
    body: impl Into<axum::body::Body>,
    csp: &'static str,
) -> Response {
    let mut response = body.into().into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    // Assets change with the binary and carry no version in their names.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The named file of `assets`, or 404.
pub fn serve_asset(assets: &'static [Asset], name: &str, csp: &'static str) -> Response {
    match assets.iter().find(|a| a.name == name) {
        Some(a) => embedded(a.content_type, a.bytes, csp),
        None => ApiError::not_found("no such file").into_response(),
    }
}

/// The console page.
#[utoipa::path(get, path = "/console", tag = "operations",
    responses((status = 200, description = "The web console: account, quota, budgets, notes, usage, requests and API keys, and for admins the users and agent settings. \
        Served with `Content-Security-Policy: default-src 'self'`.", content_type = "text/html", body = String)))]
pub async fn get_console(State(state): State<AppState>) -> Response {
    let (mode, signup) = match &state.config().auth {
        None => ("open", "closed"),
        Some(a) if a.signup == SignupMode::Open => ("accounts", "open"),
        Some(_) => ("accounts", "closed"),
    };
    let page = INDEX
        .replace("{{MODE}}", mode)
        .replace("{{SIGNUP}}", signup);
    embedded("text/html; charset=utf-8", page, CONSOLE_CSP)
}

/// The console's script, stylesheet and icon.
#[utoipa::path(get, path = "/console/{file}", tag = "operations",
    params(("file" = String, Path, description = "`console.js`, `usage.js`, `requests.js`, `keys.js`, `admin.js`, `device.js`, `console.css` or `favicon.svg`", example = "console.js")),
    responses(
        (status = 200, description = "The embedded file", content_type = "text/javascript", body = String),
        (status = 404, description = "`not_found`: no such file", body = relay_wire::ErrorBody),
    ))]
pub async fn get_console_asset(Path(file): Path<String>) -> Response {
    serve_asset(ASSETS, &file, CONSOLE_CSP)
}

/// `GET /`: a browser (one that accepts HTML) goes to the console; anything else gets the usual
/// JSON 404, naming where to look.
#[utoipa::path(get, path = "/", tag = "operations",
    responses(
        (status = 303, description = "A browser (`Accept` with `text/html`) is sent to `/console`"),
        (status = 404, description = "`not_found` for any other client, naming `/console` and `/docs`", body = relay_wire::ErrorBody),
    ))]
pub async fn get_root(headers: axum::http::HeaderMap) -> Response {
    let wants_html = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"));
    if wants_html {
        return axum::response::Redirect::to("/console").into_response();
    }
    ApiError::not_found(
        "nothing is served at / itself: the console is /console, the reference /docs",
    )
    .into_response()
}
