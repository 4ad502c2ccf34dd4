//! Examples for the reference page, added to the OpenAPI document after the route list built it:
//! a request body for every operation that takes one, a curl line for every operation, and a
//! leg's NDJSON events as a sample stream.
//!
//! Kept in one table rather than scattered over the wire types, so a reviewer sees every example
//! the page shows at once; the NDJSON sample is built from the wire crate's own event type, so it
//! cannot drift from what a leg sends.

use relay_wire::agent::{AgentEvent, FinishReason, Usage};
use serde_json::{Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::path::Operation;

/// Where the curl lines point: the default bind address.
const BASE: &str = "http://127.0.0.1:7711";

/// (method, path, request body) for every operation that takes a JSON body.
fn request_bodies() -> Vec<(&'static str, &'static str, Value)> {
    let credentials = json!({"email": "ada@example.com", "password": "correct horse battery"});
    vec![
        ("post", "/v1/auth/signup", credentials.clone()),
        ("post", "/v1/auth/signin", credentials),
        (
            "post",
            "/v1/waitlist",
            json!({"email": "ada@example.com", "source": "web"}),
        ),
        (
            "post",
            "/v1/agent/stream",
            json!({
                "model": "auto",
                "project_id": "p1",
                "messages": [
                    {"role": "system", "content": "You are a coding agent in the user's terminal."},
                    {"role": "user", "content": "Why does `cargo test` fail?"}
                ],
                "tools": [{"name": "read_file", "description": "Read a file of the project.",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
            }),
        ),
        (
            "post",
            "/v1/memory/remember",
            json!({"project_id": "p1", "note": "Use pnpm, not npm", "mem_type": "decision"}),
        ),
        ("post", "/v1/memory/recall", json!({"project_id": "p1"})),
        ("post", "/v1/memory/delete", json!({"project_id": "p1"})),
        (
            "patch",
            "/v1/memory/{id}",
            json!({"content": "Use pnpm 9, not npm"}),
        ),
        (
            "post",
            "/v1/suggest",
            json!({"partial": "git ch", "cwd": "/home/ada/relay", "recent": ["git status", "git add -A"]}),
        ),
        (
            "post",
            "/v1/search",
            json!({"query": "tokio graceful shutdown", "limit": 5}),
        ),
        (
            "post",
            "/v1/chat/completions",
            json!({
                "model": "auto",
                "stream": true,
                "messages": [
                    {"role": "system", "content": "You are a coding assistant."},
                    {"role": "user", "content": "Write a haiku about Rust."}
                ],
                "max_tokens": 200
            }),
        ),
        (
            "post",
            "/v1/messages",
            json!({
                "model": "auto",
                "max_tokens": 1024,
                "system": "You are a coding assistant.",
                "messages": [{"role": "user", "content": "Write a haiku about Rust."}]
            }),
        ),
        (
            "patch",
            "/v1/admin/users/{email}",
            json!({"limit": 500, "reset_usage": true}),
        ),
    ]
}

/// A leg as it streams: `start`, pieces of text, one terminal `done`.
pub fn ndjson_sample() -> String {
    let events = [
        AgentEvent::Start {
            request_id: "9f1c2e4b7a3d5f60".into(),
            model: "gpt-4.1".into(),
            project_id: Some("p1".into()),
            notes: 1,
            note_ids: vec!["mem#u_3f9a1c0d2b7e8f41#p1#1".into()],
        },
        AgentEvent::Text {
            text: "The test binds port 7711, ".into(),
        },
        AgentEvent::Text {
            text: "which the running server holds; bind port 0.".into(),
        },
        AgentEvent::Done {
            finish_reason: FinishReason::Stop,
            usage: Usage {
                input_tokens: 812,
                output_tokens: 24,
                cached_input_tokens: None,
                cache_write_tokens: None,
                reasoning_tokens: None,
            },
        },
    ];
    events
        .iter()
        .filter_map(|e| serde_json::to_string(e).ok())
        .map(|line| line + "\n")
        .collect()
}

/// A concrete URL for `path`: placeholders filled with plausible values.
fn concrete(path: &str) -> String {
    path.replace("{id}", "mem%23u_3f9a1c0d2b7e8f41%23p1%233")
        .replace("{email}", "bob%40example.com")
        .replace("{file}", "favicon.svg")
}

fn curl(method: &str, path: &str, op: &Operation, body: Option<&Value>) -> String {
    let mut line = format!(
        "curl -X {} '{BASE}{}'",
        method.to_uppercase(),
        concrete(path)
    );
    let needs_token = serde_json::to_value(&op.security)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .is_some_and(|reqs| reqs.iter().any(|r| r.get("bearer").is_some()));
    if needs_token {
        line.push_str(" \\\n  -H 'authorization: Bearer rly_…'");
    }
    if let Some(body) = body {
        line.push_str(&format!(
            " \\\n  -H 'content-type: application/json' \\\n  -d '{body}'"
        ));
    }
    line
}

/// Sets the example of one response's media type, when the operation has it.
fn response_example(op: &mut Operation, status: &str, media: &str, example: String) {
    if let Some(RefOr::T(response)) = op.responses.responses.get_mut(status)
        && let Some(RefOr::T(content)) = response.content.get_mut(media)
    {
        content.example = Some(Value::String(example));
    }
}

/// Adds the examples to `doc`.
pub fn add_examples(doc: &mut utoipa::openapi::OpenApi) {
    let bodies = request_bodies();
    for (path, item) in &mut doc.paths.paths {
        let operations = [
            ("get", &mut item.get),
            ("put", &mut item.put),
            ("post", &mut item.post),
            ("delete", &mut item.delete),
            ("patch", &mut item.patch),
        ];
        for (method, op) in operations {
            let Some(op) = op.as_mut() else { continue };
            let body = bodies
                .iter()
                .find(|(m, p, _)| *m == method && p == path)
                .map(|(_, _, b)| b);
            if let (Some(body), Some(RefOr::T(request))) = (body, op.request_body.as_mut())
                && let Some(RefOr::T(content)) = request.content.get_mut("application/json")
            {
                content.example = Some(body.clone());
            }
            let sample =
                json!([{"lang": "Shell", "label": "curl", "source": curl(method, path, op, body)}]);
            op.extensions
                .get_or_insert_with(Default::default)
                .insert("x-codeSamples".to_owned(), sample);
            if path == "/v1/agent/stream" {
                response_example(op, "200", "application/x-ndjson", ndjson_sample());
                // Renderers show a string example of a JSON-like media type as one quoted
                // string; the description shows the stream as it arrives, one event a line.
                let description = op.description.get_or_insert_with(String::new);
                description.push_str(&format!(
                    "\n\nA leg as it streams, one event a line:\n\n```\n{}```\n",
                    ndjson_sample()
                ));
            }
            if path == "/console" || path == "/docs" {
                response_example(op, "200", "text/html", PAGE_SAMPLE.to_owned());
            }
            if path == "/metrics" {
                response_example(op, "200", "text/plain", METRICS_SAMPLE.to_owned());
            }
        }
    }
}

const PAGE_SAMPLE: &str =
    "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n…";

const METRICS_SAMPLE: &str = "# HELP relay_http_requests_total HTTP requests by method, route and status.\n\
    # TYPE relay_http_requests_total counter\n\
    relay_http_requests_total{method=\"GET\",route=\"/v1/me\",status=\"200\"} 42\n";
