//! The OpenAPI document, drawn from the route list, and the single-page reference rendered from it.
//!
//! The page is plain HTML rendered on the server from the document: no script, no CDN, so it works on
//! closed networks and a test can check it names every endpoint.

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::app::AppState;

#[derive(OpenApi)]
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
        (name = "agent", description = "Agent legs streamed as NDJSON, and the client-executed tool catalogue"),
        (name = "memory", description = "Durable per-user, per-project notes, injected into agent legs"),
        (name = "suggest", description = "Shell command suggestions and server-side web search"),
        (name = "operations", description = "Health, readiness, metrics and this reference"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// Documents the answer every operation that requires a bearer token can give: 401 `unauthorized`
/// when the token is missing, unknown, signed out or expired. Added here rather than on each
/// handler, so no operation can forget it (schemathesis found nine that had).
pub fn add_unauthorized_responses(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::SecurityRequirement;
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    let optional = SecurityRequirement::default();
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in operations.into_iter().flatten() {
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
                    ResponseBuilder::new()
                        .description(
                            "`unauthorized`: no bearer token, or one that is unknown, signed out or \
                             expired (accounts on)",
                        )
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(Ref::from_schema_name("ErrorBody")))
                                .build(),
                        )
                        .build()
                        .into()
                });
        }
    }
}

/// Documents what `guard::check` answers before any handler: 415 `unsupported_media_type` for a
/// body that is not declared JSON (every operation that takes a body), and in open mode 403
/// `forbidden` for another web origin or a non-loopback host name (every operation).
pub fn add_guard_responses(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    let error = |description: &str| {
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
    };
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in operations.into_iter().flatten() {
            let responses = &mut op.responses.responses;
            if op.request_body.is_some() {
                responses.entry("415".to_owned()).or_insert_with(|| {
                    error("`unsupported_media_type`: a body sent without content-type application/json (or another `+json` type)")
                });
            }
            responses.entry("403".to_owned()).or_insert_with(|| {
                error("`forbidden`: open mode only, a request from another web origin (not in `[cors] allow_origins`) or to a host name that is not loopback or in `allowed_hosts`")
            });
        }
    }
}

/// The document's fixed parts; paths are added by the route list.
pub fn base() -> utoipa::openapi::OpenApi {
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
        state.docs().json.clone(),
    )
        .into_response()
}

/// The single-page reference.
#[utoipa::path(get, path = "/docs", tag = "operations",
    responses((status = 200, description = "HTML reference of every endpoint", content_type = "text/html", body = String)))]
pub async fn get_docs(State(state): State<AppState>) -> Html<String> {
    Html(state.docs().html.clone())
}

/// The document in both forms, rendered once at start-up.
pub struct Docs {
    pub json: String,
    pub html: String,
}

impl Docs {
    pub fn new(doc: &utoipa::openapi::OpenApi) -> anyhow::Result<Self> {
        let value = serde_json::to_value(doc)?;
        Ok(Self {
            json: serde_json::to_string_pretty(&value)?,
            html: render_html(&value),
        })
    }
}

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .map(esc)
        .unwrap_or_default()
}

/// The anchor of one operation, e.g. `post-v1-auth-signin`.
pub fn anchor(method: &str, path: &str) -> String {
    let p: String = path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{method}{p}")
        .replace("--", "-")
        .trim_end_matches('-')
        .to_owned()
}

fn schema_ref(v: &Value) -> String {
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("<a href=\"#schema-{0}\">{0}</a>", esc(name));
    }
    if let Some(items) = v.get("items") {
        return format!("array of {}", schema_ref(items));
    }
    match v.get("type") {
        Some(Value::String(t)) => esc(t),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "object".into(),
    }
}

fn render_html(doc: &Value) -> String {
    let info = &doc["info"];
    let mut toc = String::new();
    let mut body = String::new();
    let empty = serde_json::Map::new();
    let paths = doc["paths"].as_object().unwrap_or(&empty);
    for (path, item) in paths {
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let id = anchor(method, path);
            let upper = method.to_uppercase();
            toc.push_str(&format!(
                "<li><a href=\"#{id}\"><code>{upper} {}</code></a> {}</li>\n",
                esc(path),
                text(op, "summary")
            ));
            body.push_str(&format!(
                "<section class=\"op\" id=\"{id}\"><h3><code>{upper} {}</code></h3>\n<p><strong>{}</strong></p><p>{}</p>\n",
                esc(path),
                text(op, "summary"),
                text(op, "description")
            ));
            let secured = op
                .get("security")
                .and_then(Value::as_array)
                .is_some_and(|s| s.iter().any(|r| r.get("bearer").is_some()));
            body.push_str(if secured {
                "<p class=\"auth\">Authorization: Bearer token (ignored in open mode)</p>\n"
            } else {
                "<p class=\"auth\">Public</p>\n"
            });
            if let Some(params) = op.get("parameters").and_then(Value::as_array) {
                body.push_str("<table><tr><th>parameter</th><th>in</th><th>type</th><th>required</th><th>description</th></tr>\n");
                for p in params {
                    body.push_str(&format!(
                        "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        text(p, "name"),
                        text(p, "in"),
                        schema_ref(&p["schema"]),
                        p.get("required").and_then(Value::as_bool).unwrap_or(false),
                        text(p, "description")
                    ));
                }
                body.push_str("</table>\n");
            }
            if let Some(content) = op
                .pointer("/requestBody/content")
                .and_then(Value::as_object)
            {
                for (ct, media) in content {
                    body.push_str(&format!(
                        "<p>Request body (<code>{}</code>): {}</p>\n",
                        esc(ct),
                        schema_ref(&media["schema"])
                    ));
                }
            }
            if let Some(responses) = op.get("responses").and_then(Value::as_object) {
                body.push_str("<table><tr><th>status</th><th>meaning</th><th>body</th></tr>\n");
                for (status, r) in responses {
                    let shape = r
                        .get("content")
                        .and_then(Value::as_object)
                        .map(|c| {
                            c.iter()
                                .map(|(ct, m)| {
                                    format!("<code>{}</code> {}", esc(ct), schema_ref(&m["schema"]))
                                })
                                .collect::<Vec<_>>()
                                .join("<br>")
                        })
                        .unwrap_or_default();
                    body.push_str(&format!(
                        "<tr><td>{}</td><td>{}</td><td>{shape}</td></tr>\n",
                        esc(status),
                        text(r, "description")
                    ));
                }
                body.push_str("</table>\n");
            }
            body.push_str("</section>\n");
        }
    }
    let mut schemas = String::new();
    if let Some(map) = doc
        .pointer("/components/schemas")
        .and_then(Value::as_object)
    {
        for (name, schema) in map {
            let pretty = serde_json::to_string_pretty(schema).unwrap_or_default();
            schemas.push_str(&format!(
                "<section id=\"schema-{0}\"><h3>{0}</h3><pre>{1}</pre></section>\n",
                esc(name),
                esc(&pretty)
            ));
        }
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title} API reference</title>\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<style>{STYLE}</style></head>\n\
         <body><header><h1>{title} <small>{version}</small></h1><p>{desc}</p>\
         <p>Machine-readable: <a href=\"/openapi.json\">/openapi.json</a></p></header>\n\
         <nav><h2>Endpoints</h2><ul>\n{toc}</ul></nav>\n<main>{body}<h2>Schemas</h2>\n{schemas}</main></body></html>\n",
        title = text(info, "title"),
        version = text(info, "version"),
        desc = text(info, "description"),
    )
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}\
code,pre{font-family:ui-monospace,monospace}pre{background:#f6f8fa;padding:.8em;overflow:auto}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left}\
.op{border-top:1px solid #ccc;padding-top:.5em}.auth{color:#666;font-size:.9em}";
