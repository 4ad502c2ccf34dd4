//! The OpenAPI document, drawn from the route list, and the single-page reference rendered from it.
//!
//! The page is Redoc, a maintained renderer, embedded in the binary with the page's own script: it
//! renders the document's markdown and examples in the browser and loads nothing from another host,
//! so it works on closed networks.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi as _};

use crate::http::console::{Asset, embedded, serve_asset};
use crate::http::state::AppState;

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Relay",
        description = "The backend of an AI coding terminal: accounts and quota, agent streaming to model \
                       providers, project memory, command suggestions. Every error is `{error, message}` with \
                       a stable machine code.",
        license(name = "MIT")
    ),
    modifiers(&BearerAuth),
    components(schemas(relay_wire::ErrorCode)),
    tags(
        (name = "accounts", description = "Signup, signin, sessions, the account snapshot and the waitlist"),
        (name = "sign-in", description = "Agents sign in (auth mode): the OAuth 2.0 device flow Claude Code's `/login` runs, token refresh and revocation, the `/device` approval page, and API keys"),
        (name = "agent", description = "Agent legs streamed as NDJSON, and the client-executed tool catalogue"),
        (name = "usage", description = "The usage ledger: tokens and cost per leg, summed per day, model, project or account"),
        (name = "memory", description = "Durable per-user, per-project notes, injected into agent legs"),
        (name = "mcp", description = "The notes as MCP tools (remember, recall, search_notes, forget) over Streamable HTTP, for Claude Code, Codex and other MCP clients"),
        (name = "suggest", description = "Shell command suggestions and server-side web search"),
        (name = "operations", description = "Health, readiness, metrics and this reference"),
        (name = "compatible", description = "OpenAI Chat Completions, Anthropic Messages and the models list, for SDKs and tools pointed at Relay; errors in each API's own shape"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// Every operation of the document, whatever its method.
fn operations_mut(doc: &mut OpenApi) -> impl Iterator<Item = &mut Operation> {
    doc.paths.paths.values_mut().flat_map(|item| {
        [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
    })
}

/// A response whose body is the usual `{error, message}`.
fn error_response(description: &str) -> RefOr<utoipa::openapi::Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
        .into()
}

/// Documents the answer every operation that requires a bearer token can give: 401 `unauthorized`
/// when the token is missing, unknown, signed out or expired. Added here rather than on each
/// handler, so no operation can forget it (schemathesis found nine that had).
pub fn add_unauthorized_responses(doc: &mut OpenApi) {
    let optional = SecurityRequirement::default();
    for op in operations_mut(doc) {
        // `security((), ("bearer" = []))` marks a token as optional: such an operation answers
        // without one.
        let needs_token = op
            .security
            .as_ref()
            .is_some_and(|reqs| !reqs.is_empty() && !reqs.contains(&optional));
        if !needs_token {
            continue;
        }
        op.responses
            .responses
            .entry("401".to_owned())
            .or_insert_with(|| {
                error_response(
                    "`unauthorized`: no bearer token, or one that is unknown, signed out or \
                     expired (accounts on)",
                )
            });
    }
}

/// Documents what `guard::check` answers before any handler: 415 `unsupported_media_type` for a
/// body that is not declared JSON (every operation that takes a body), and in open mode 403
/// `forbidden` for another web origin or a non-loopback host name (every operation).
pub fn add_guard_responses(doc: &mut OpenApi) {
    for op in operations_mut(doc) {
        let responses = &mut op.responses.responses;
        // The OAuth endpoints take forms (`guard::takes_form`): only JSON bodies are held to JSON.
        let json_body = op.request_body.as_ref().is_some_and(|b| match b {
            utoipa::openapi::RefOr::T(b) => b.content.contains_key("application/json"),
            utoipa::openapi::RefOr::Ref(_) => true,
        });
        if json_body {
            responses.entry("415".to_owned()).or_insert_with(|| {
                error_response("`unsupported_media_type`: a body sent without content-type application/json (or another `+json` type)")
            });
        }
        responses.entry("403".to_owned()).or_insert_with(|| {
            error_response("`forbidden`: open mode only, a request from another web origin (not in `[cors] allow_origins`) or to a host name that is not loopback or in `allowed_hosts`")
        });
    }
}

/// Makes each operation's summary plain text on one line. Redoc shows a summary as the operation's
/// title and in the menu without rendering its markdown, so `code` would keep its backticks there
/// and a wrapped doc comment its line break.
pub fn plain_summaries(doc: &mut OpenApi) {
    for op in operations_mut(doc) {
        if let Some(summary) = op.summary.as_mut() {
            *summary = summary
                .replace('`', "")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
        }
    }
}

/// The document's fixed parts; paths are added by the route list.
pub fn base() -> OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc
}

/// The OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "OpenAPI 3.1 document of every endpoint", content_type = "application/json", body = Object)))]
pub async fn get_openapi(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi_json().to_owned(),
    )
        .into_response()
}

/// Redoc may inject its own styles and run its search index in a worker made from a blob; nothing
/// may come from another host.
const DOCS_CSP: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
    font-src 'self' data:; worker-src 'self' blob:; base-uri 'none'; frame-ancestors 'none'";

const PAGE: &str = include_str!("../../assets/docs/index.html");

/// Redoc's standalone bundle (npm `redoc`, pinned in `assets/docs/README.md`) and the page's own script.
const ASSETS: &[Asset] = &[
    Asset::script(
        "redoc.standalone.js",
        include_bytes!("../../assets/docs/redoc.standalone.js"),
    ),
    Asset::script("docs.js", include_bytes!("../../assets/docs/docs.js")),
    Asset::svg(
        "favicon.svg",
        include_bytes!("../../assets/docs/favicon.svg"),
    ),
];

/// The single-page reference, drawn by Redoc from `/openapi.json`.
#[utoipa::path(get, path = "/docs", tag = "operations",
    responses((status = 200, description = "HTML reference of every endpoint, rendered in the browser by an embedded Redoc", content_type = "text/html", body = String)))]
pub async fn get_docs() -> Response {
    embedded("text/html; charset=utf-8", PAGE, DOCS_CSP)
}

/// The reference page's script files.
#[utoipa::path(get, path = "/docs/{file}", tag = "operations",
    params(("file" = String, Path, description = "`redoc.standalone.js`, `docs.js` or `favicon.svg`", example = "docs.js")),
    responses(
        (status = 200, description = "The embedded file", content_type = "text/javascript", body = String),
        (status = 404, description = "`not_found`: no such file", body = relay_wire::ErrorBody),
    ))]
pub async fn get_docs_asset(Path(file): Path<String>) -> Response {
    serve_asset(ASSETS, &file, DOCS_CSP)
}
