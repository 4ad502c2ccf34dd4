//! `/mcp`: Relay's project notes as MCP tools over Streamable HTTP (issue 41), for Claude Code,
//! Codex and any other MCP client.
//!
//! The protocol (JSON-RPC, `initialize` at 2025-06-18 and 2025-11-25, the stateless 2026-07-28
//! revision with `server/discover` and its `Mcp-Method`/`Mcp-Name` header checks, sessions, SSE) is
//! the official `rmcp` crate's `StreamableHttpService`; this module is the gate in front of it and
//! `notes.rs` the tools. The gate keeps Relay's rules: the caller comes from the bearer token as on
//! every route (open mode: `local`, and only over loopback), a web origin other than the relay's own
//! or a configured one is refused (a page must not drive the tools), and the project comes from the
//! connection (`x-relay-project`, else `?project=`), never from a model's argument. Nothing in a
//! request names a process, file or URL that Relay opens.

mod notes;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Extension, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use relay_wire::{ErrorBody, ErrorCode};
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tower::ServiceExt;

use crate::accounts::Caller;
use crate::domain::ProjectId;
use crate::error::ApiError;
use crate::http::state::AppState;

pub use notes::TOOL_NAMES;

/// The largest JSON-RPC message accepted: notes are at most 16 KiB, so 1 MiB is generous.
const BODY_LIMIT: usize = 1024 * 1024;

/// The MCP service, built once with the router and shared by every request.
#[derive(Clone)]
pub struct Mcp(Arc<StreamableHttpService<notes::Notes, LocalSessionManager>>);

impl Mcp {
    pub fn new() -> Self {
        // rmcp drops a session idle for five minutes (`SessionConfig::DEFAULT_KEEP_ALIVE`); its
        // client then gets 404 and initialises again.
        let sessions = LocalSessionManager::default();
        // Host and Origin are Relay's own checks (the guard, and `check_origin` below): rmcp's
        // default host list is loopback only, which would refuse a deployed relay's own name.
        let mut config = StreamableHttpServerConfig::default().disable_allowed_hosts();
        config.max_request_body_bytes = BODY_LIMIT;
        Self(Arc::new(StreamableHttpService::new(
            || Ok(notes::Notes),
            Arc::new(sessions),
            config,
        )))
    }
}

impl Default for Mcp {
    fn default() -> Self {
        Self::new()
    }
}

/// Who is calling and in which project: put in the request's extensions for the tools to read.
#[derive(Clone)]
pub(crate) struct Connection {
    pub state: AppState,
    pub caller: Caller,
    /// The connection's project, or why there is none (answered when a tool needs it).
    pub project: Result<ProjectId, String>,
    pub user_agent: Option<String>,
}

/// An MCP message to Relay's notes tools (JSON-RPC 2.0 over Streamable HTTP).
#[utoipa::path(post, path = "/mcp", tag = "mcp",
    security(("bearer" = [])),
    params(
        ("x-relay-project" = Option<String>, Header, description = "The project the tools work in"),
        ("project" = Option<String>, Query, description = "The project, when the client cannot send a header"),
        ("Mcp-Method" = Option<String>, Header, description = "2026-07-28: the body's method; a mismatch is 400"),
        ("Mcp-Name" = Option<String>, Header, description = "2026-07-28: the body's tool name on tools/call; a mismatch is 400"),
    ),
    request_body(content = serde_json::Value, content_type = "application/json",
        description = "A JSON-RPC request or notification: initialize, notifications/initialized, server/discover, tools/list, tools/call, ping"),
    responses(
        (status = 200, description = "The JSON-RPC answer, as JSON or as an SSE stream (`Accept` must list both `application/json` and `text/event-stream`)"),
        (status = 202, description = "A notification was accepted"),
        (status = 400, description = "Not JSON-RPC, or `Mcp-Method`/`Mcp-Name` differ from the body"),
        (status = 403, description = "`forbidden`: a foreign web origin, or open mode reached over a non-loopback address", body = ErrorBody),
        (status = 404, description = "Unknown or expired `Mcp-Session-Id`: initialise again"),
    ))]
pub async fn post_mcp(
    State(state): State<AppState>,
    Extension(mcp): Extension<Mcp>,
    req: Request,
) -> Response {
    serve(state, mcp, req).await
}

/// The session's server-to-client SSE stream (sessions of 2025 protocol versions).
#[utoipa::path(get, path = "/mcp", tag = "mcp",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "An SSE stream of server messages", content_type = "text/event-stream"),
        (status = 403, description = "`forbidden`: a foreign web origin, or open mode reached over a non-loopback address", body = ErrorBody),
    ))]
pub async fn get_mcp(
    State(state): State<AppState>,
    Extension(mcp): Extension<Mcp>,
    req: Request,
) -> Response {
    serve(state, mcp, req).await
}

/// Ends an MCP session (`Mcp-Session-Id`).
#[utoipa::path(delete, path = "/mcp", tag = "mcp",
    security(("bearer" = [])),
    responses(
        (status = 202, description = "The session ended"),
        (status = 403, description = "`forbidden`: a foreign web origin, or open mode reached over a non-loopback address", body = ErrorBody),
    ))]
pub async fn delete_mcp(
    State(state): State<AppState>,
    Extension(mcp): Extension<Mcp>,
    req: Request,
) -> Response {
    serve(state, mcp, req).await
}

async fn serve(state: AppState, mcp: Mcp, req: Request) -> Response {
    // The body is not `Sync`, so only the head is borrowed across the caller's lookup.
    let (mut parts, body) = req.into_parts();
    let connection = match admit(&state, &parts).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    parts.extensions.insert(connection);
    let req = Request::from_parts(parts, body);
    match (*mcp.0).clone().oneshot(req).await {
        Ok(res) => res.map(axum::body::Body::new),
        Err(never) => match never {},
    }
}

/// The checks before any MCP message is read: origin, loopback in open mode, the caller.
async fn admit(state: &AppState, req: &Parts) -> Result<Connection, ApiError> {
    let headers = &req.headers;
    check_origin(state, headers)?;
    if state.config().open_mode() {
        let peer = req
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_canonical());
        if !peer.is_some_and(|ip| ip.is_loopback()) {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "open mode serves /mcp on loopback only; sign-in (auth mode) serves it to others",
            ));
        }
    }
    let caller = Caller::from_token(state, crate::accounts::token::bearer_token(headers)).await?;
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok(Connection {
        state: state.clone(),
        caller,
        project: project(headers, req.uri.query()),
        user_agent,
    })
}

/// The MCP transport rule (validate `Origin` against DNS rebinding) in every mode: the tools act
/// on the caller's notes, so only the relay's own origin or a configured one may send them.
fn check_origin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("null");
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if crate::http::guard::origin_allowed(origin, host, &state.config().cors.allow_origins) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Forbidden,
            "/mcp refuses requests from other web origins; list them in [cors] allow_origins",
        ))
    }
}

/// `x-relay-project`, else `?project=`; the error says how to set one.
fn project(headers: &HeaderMap, query: Option<&str>) -> Result<ProjectId, String> {
    let from_header = headers
        .get("x-relay-project")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    let from_query = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, v)| k == "project" && !v.is_empty())
            .map(|(_, v)| v.into_owned())
    });
    match from_header.or(from_query) {
        Some(p) => ProjectId::parse(&p).map_err(|e| format!("the connection's project: {e}")),
        None => Err(
            "this MCP connection names no project: send the header `x-relay-project: <id>` \
             (`relay project` prints this directory's id; `relay claude` and `relay codex` set it), \
             or add `?project=<id>` to the server URL"
                .to_owned(),
        ),
    }
}
