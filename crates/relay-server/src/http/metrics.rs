//! The middleware that counts HTTP requests, and `/metrics` (every metric Relay exports is declared
//! in `crate::metrics::registry`).
//!
//! Requests are labelled by the matched route template, never the raw path, so ids in paths cannot
//! blow up the series count. The registry belongs to one app (no global recorder), so tests and
//! several apps in one process never mix their counts.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::state::AppState;
use crate::metrics::format;

/// Counts every request that reached a route (the 404 fallback counts its own as `unmatched`).
pub async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().as_str().to_owned();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    // The request span (opened before routing) learns its route template here.
    let span = tracing::Span::current();
    span.record("http.route", route.as_str());
    crate::telemetry::rename(&span, format!("{method} {route}"));
    let response = next.run(req).await;
    state.metrics().observe_request(
        &method,
        &route,
        response.status(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// Prometheus metrics, in the format `Accept` asks for.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "OpenMetrics 1.0 when `Accept` prefers `application/openmetrics-text`, otherwise Prometheus text format 0.0.4",
        content(
            (String = "text/plain"),
            (String = "application/openmetrics-text"),
        ))))]
pub async fn get_metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let body = state.metrics().render();
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let (content_type, body) = if format::wants_openmetrics(accept) {
        (format::OPENMETRICS, body)
    } else {
        (format::TEXT_004, format::to_text_004(&body))
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::VARY, "accept"),
        ],
        body,
    )
        .into_response()
}
