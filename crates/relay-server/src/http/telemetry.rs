//! `POST /v1/metrics`, `/v1/logs`, `/v1/traces`: where a signed-in agent sends its OTLP/HTTP
//! exports (protobuf or JSON). Each is counted, tagged with the account and forwarded by
//! `agent_telemetry`, or dropped without a collector; the answer is 200 either way, since
//! anything else makes the agent's exporter log an error on every flush (issue 40).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

use crate::accounts::Caller;
use crate::accounts::token::bearer_token;
use crate::agent_telemetry::{Encoding, Signal};
use crate::http::compat::errors::{Api, respond};
use crate::http::state::AppState;
use crate::metrics::registry::SignalLabels;

/// An export may be this large.
pub const BODY_LIMIT: usize = 4 * 1024 * 1024;

/// One export: the caller first (a bad token is Anthropic's 401), then the body.
async fn accept(state: &AppState, headers: &HeaderMap, body: Bytes, signal: Signal) -> Response {
    let caller = match Caller::from_token(state, bearer_token(headers)).await {
        Ok(caller) => caller,
        Err(e) => return respond(Api::Anthropic, e),
    };
    state
        .metrics()
        .agent_telemetry
        .get_or_create(&SignalLabels {
            signal: signal.as_str().to_owned(),
        })
        .inc();
    let forwarder = state.telemetry();
    if forwarder.enabled() {
        let email = match &caller {
            Caller::User(user) => user.email.as_str(),
            Caller::Local => crate::accounts::LOCAL_USER,
        };
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        match Encoding::of(content_type).and_then(|encoding| {
            Some((
                encoding,
                crate::agent_telemetry::tag(signal, encoding, &body, email)?,
            ))
        }) {
            Some((encoding, tagged)) => forwarder.send(signal, encoding, tagged),
            None => tracing::debug!(
                signal = signal.as_str(),
                "an agent's export was neither OTLP protobuf nor OTLP JSON; dropped"
            ),
        }
    }
    axum::http::StatusCode::OK.into_response()
}

/// An agent's OTLP metrics export.
#[utoipa::path(post, path = "/v1/metrics", tag = "sign-in",
    security(("bearer" = [])),
    request_body(content = String, description = "OTLP/HTTP `ExportMetricsServiceRequest`, `application/x-protobuf` or `application/json`, at most 4 MiB", content_type = "application/x-protobuf"),
    responses(
        (status = 200, description = "Accepted: forwarded to `[telemetry] otlp_endpoint` with `enduser.id` set to the account's email on every resource, or dropped without one; counted in `relay_agent_telemetry_total{signal}`"),
        (status = 401, description = "`authentication_error` (Anthropic's shape)", body = crate::http::compat::anthropic::AnthropicErrorBody),
        (status = 413, description = "Over 4 MiB"),
    ))]
pub async fn post_metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    accept(&state, &headers, body, Signal::Metrics).await
}

/// An agent's OTLP logs export.
#[utoipa::path(post, path = "/v1/logs", tag = "sign-in",
    security(("bearer" = [])),
    request_body(content = String, description = "OTLP/HTTP `ExportLogsServiceRequest`, `application/x-protobuf` or `application/json`, at most 4 MiB", content_type = "application/x-protobuf"),
    responses(
        (status = 200, description = "Accepted: forwarded with `enduser.id` set, or dropped without a collector; counted in `relay_agent_telemetry_total{signal}`"),
        (status = 401, description = "`authentication_error` (Anthropic's shape)", body = crate::http::compat::anthropic::AnthropicErrorBody),
        (status = 413, description = "Over 4 MiB"),
    ))]
pub async fn post_logs(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    accept(&state, &headers, body, Signal::Logs).await
}

/// An agent's OTLP traces export.
#[utoipa::path(post, path = "/v1/traces", tag = "sign-in",
    security(("bearer" = [])),
    request_body(content = String, description = "OTLP/HTTP `ExportTraceServiceRequest`, `application/x-protobuf` or `application/json`, at most 4 MiB", content_type = "application/x-protobuf"),
    responses(
        (status = 200, description = "Accepted: forwarded with `enduser.id` set, or dropped without a collector; counted in `relay_agent_telemetry_total{signal}`"),
        (status = 401, description = "`authentication_error` (Anthropic's shape)", body = crate::http::compat::anthropic::AnthropicErrorBody),
        (status = 413, description = "Over 4 MiB"),
    ))]
pub async fn post_traces(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    accept(&state, &headers, body, Signal::Traces).await
}
