//! The app factory: stores and state from configuration, the router with its layers and
//! fallbacks, and the shutdown signal (`server` serves the router). Nothing but `lib` and `shutdown`
//! depends on it.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

use crate::config::Config;
use crate::error::{ApiError, code_for_status};
use crate::http::state::AppState;
use crate::store::Stores;

/// Request bodies above this are 413 (CONTRACT.md: 1 MiB except the agent stream).
pub const BODY_LIMIT: usize = 1024 * 1024;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Opened stores and everything else the app needs, built from configuration.
pub struct Relay {
    state: AppState,
}

impl Relay {
    /// Opens the configured stores and builds the state; provider keys come from the process environment.
    pub async fn from_config(config: Config) -> anyhow::Result<Self> {
        let stores = Stores::open(&config).await?;
        Self::with_stores(config, stores, &crate::config::ProcessEnv)
    }

    /// Builds the state over stores opened elsewhere (tests wrap real stores this way); `env`
    /// supplies provider keys.
    pub fn with_stores(
        config: Config,
        stores: Stores,
        env: &dyn crate::config::Env,
    ) -> anyhow::Result<Self> {
        // Rendered once here: `app` is the one module that knows every route.
        let openapi_json = serde_json::to_string_pretty(&crate::http::routes::openapi())?;
        Ok(Self {
            state: AppState::new(config, stores, env, openapi_json)?,
        })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// After the server has stopped: leaves the stores ready for a quick next start.
    pub async fn close(&self) {
        // The ledger's queued records go to the store before it is closed.
        self.state.ledger().close().await;
        self.state.memory().close().await;
        if let Some(auth) = self.state.auth() {
            auth.close().await;
        }
    }

    /// The complete router: every route of `routes::api`, the fallbacks, and the layers.
    pub fn router(&self) -> Router {
        let state = self.state.clone();
        let (router, _) = crate::http::routes::api().split_for_parts();
        let mut router = router
            .route_layer(middleware::from_fn_with_state(
                state.clone(),
                crate::http::metrics::track,
            ))
            .fallback(fallback_not_found)
            .method_not_allowed_fallback(fallback_method_not_allowed)
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .layer(middleware::from_fn(json_errors))
            .layer(middleware::from_fn_with_state(
                state.clone(),
                crate::http::guard::check,
            ))
            .layer(CatchPanicLayer::custom(|_| {
                ApiError::internal("a handler panicked").into_response()
            }))
            .layer(SetResponseHeaderLayer::overriding(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ))
            .layer(SetResponseHeaderLayer::overriding(
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ));
        if let Some(cors) = cors_layer(state.config()) {
            router = router.layer(cors);
        }
        let trusted = state.config().trusted_proxies.clone();
        router
            .layer(PropagateRequestIdLayer::new(REQUEST_ID))
            .layer(
                TraceLayer::new_for_http()
                    // Only method, path, client address and request id: headers (tokens) and
                    // bodies (passwords) never reach the log.
                    .make_span_with(move |req: &Request| {
                        let id = req
                            .extensions()
                            .get::<RequestId>()
                            .and_then(|id| id.header_value().to_str().ok())
                            .unwrap_or("-");
                        let peer = req
                            .extensions()
                            .get::<axum::extract::ConnectInfo<SocketAddr>>()
                            .map(|c| c.0.ip());
                        let client = crate::http::guard::client_ip(peer, req.headers(), &trusted)
                            .map_or_else(|| "-".to_owned(), |ip| ip.to_string());
                        // The route template and status are filled in once known; the span continues
                        // the caller's W3C trace when it sent one.
                        let span = tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), client = %client, request_id = %id,
                            otel.name = %req.method(), otel.kind = "server", http.request.method = %req.method(),
                            http.route = tracing::field::Empty, http.response.status_code = tracing::field::Empty,
                            otel.status_code = tracing::field::Empty);
                        crate::telemetry::continue_trace(&span, req.headers());
                        span
                    })
                    .on_request(())
                    // The `response` line below already names a 5xx: one line per request.
                    .on_failure(())
                    .on_response(
                        |res: &Response, latency: Duration, span: &tracing::Span| {
                            span.record("http.response.status_code", res.status().as_u16());
                            if res.status().is_server_error() {
                                span.record("otel.status_code", "ERROR");
                            }
                            tracing::info!(status = res.status().as_u16(), latency_ms = latency.as_secs_f64() * 1000.0, "response");
                        },
                    ),
            )
            .layer(SetRequestIdLayer::new(REQUEST_ID, RandomRequestId))
            // Before the id is taken: a client's own is capped and sanitised (or replaced).
            .layer(middleware::map_request(sanitise_request_id))
            .with_state(state)
    }
}

fn cors_layer(config: &Config) -> Option<CorsLayer> {
    let origins = &config.cors.allow_origins;
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
            // The compatible endpoints' headers too, so a browser SDK passes the preflight.
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                REQUEST_ID,
                HeaderName::from_static("x-api-key"),
                HeaderName::from_static("anthropic-version"),
                HeaderName::from_static("x-relay-project"),
                HeaderName::from_static("x-relay-cwd"),
                HeaderName::from_static("x-relay-git-remote"),
            ])
            .expose_headers([
                REQUEST_ID,
                HeaderName::from_static(crate::http::compat::NOTE_IDS),
            ])
            .max_age(Duration::from_secs(600)),
    )
}

/// A client's `x-request-id` as it is kept (`extract::sanitise_request_id`: visible ASCII, at
/// most 128 bytes), or removed when nothing of it is left, so that `RandomRequestId` makes one.
async fn sanitise_request_id(mut request: Request) -> Request {
    let headers = request.headers_mut();
    if let Some(raw) = headers.get(&REQUEST_ID) {
        match crate::http::extract::sanitise_request_id(raw.as_bytes())
            .and_then(|id| HeaderValue::from_str(&id).ok())
        {
            Some(id) if id.as_bytes() == raw.as_bytes() => {}
            Some(id) => {
                headers.insert(REQUEST_ID, id);
            }
            None => {
                headers.remove(REQUEST_ID);
            }
        }
    }
    request
}

/// Request ids: 16 random bytes in hex. A client's own `x-request-id` is kept (sanitised first).
#[derive(Clone, Copy)]
struct RandomRequestId;

impl MakeRequestId for RandomRequestId {
    fn make_request_id<B>(&mut self, _request: &axum::http::Request<B>) -> Option<RequestId> {
        let bytes: [u8; 16] = rand::random();
        HeaderValue::from_str(&hex::encode(bytes))
            .ok()
            .map(RequestId::new)
    }
}

async fn fallback_not_found(State(state): State<AppState>, method: Method) -> ApiError {
    state
        .metrics()
        .observe_request(method.as_str(), "unmatched", StatusCode::NOT_FOUND, 0.0);
    ApiError::not_found("no such endpoint; see /docs")
}

async fn fallback_method_not_allowed() -> ApiError {
    ApiError::new(
        relay_wire::ErrorCode::MethodNotAllowed,
        "this endpoint does not take that method; see /docs",
    )
}

/// Rewrites any error that did not come from our handlers (a framework rejection) into our shape.
async fn json_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if is_json {
        return response;
    }
    let code = code_for_status(status);
    let message = status.canonical_reason().unwrap_or("error").to_lowercase();
    let mut rewritten = ApiError::new(code, message).into_response();
    *rewritten.status_mut() = status;
    for name in [header::RETRY_AFTER, header::ALLOW] {
        if let Some(v) = response.headers().get(&name) {
            rewritten.headers_mut().insert(name, v.clone());
        }
    }
    rewritten
}

/// Resolves on ctrl-c or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    // `shutdown::serve_bounded` invites the second ctrl-c once it listens for it.
    tracing::info!("shutting down: draining in-flight requests");
}
