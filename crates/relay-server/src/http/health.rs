//! Liveness and readiness: `/healthz` answers while the process runs; `/readyz` checks each store.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use relay_wire::health::{Check, Health, Readiness};

use crate::http::state::AppState;
use crate::store::StoreResult;

/// A readiness check that takes longer than this counts as down.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is up", body = Health)))]
pub async fn get_healthz() -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok".into(),
    })
}

/// Readiness: every store answers.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Every check passed", body = Readiness),
        (status = 503, description = "A check failed; `checks` says which", body = Readiness),
    ))]
pub async fn get_readyz(State(state): State<AppState>) -> (StatusCode, axum::Json<Readiness>) {
    let mut checks = BTreeMap::new();
    checks.insert("memory_store".to_owned(), run(state.memory().ping()).await);
    if let Some(auth) = state.auth() {
        checks.insert("auth_store".to_owned(), run(auth.ping()).await);
    }
    if let Some(shared) = state.shared_limits() {
        // Degraded, not down: while Redis is away each instance limits on its own and serves on.
        let started = Instant::now();
        // A failure in the last second counts too: decisions are being made locally right now.
        let outcome = if shared.degraded() {
            Err("Redis failed a moment ago".to_owned())
        } else {
            shared.ping().await
        };
        checks.insert(
            "limits".to_owned(),
            Check {
                status: if outcome.is_ok() { "ok" } else { "degraded" }.into(),
                detail: outcome
                    .err()
                    .map(|e| format!("{e}; using per-instance limits")),
                latency_ms: started.elapsed().as_secs_f64() * 1000.0,
            },
        );
    }
    let ready = checks.values().all(|c| c.status != "down");
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = Readiness {
        status: if ready { "ready" } else { "unready" }.into(),
        checks,
    };
    (status, axum::Json(body))
}

async fn run(check: impl Future<Output = StoreResult<()>>) -> Check {
    let started = Instant::now();
    let outcome = tokio::time::timeout(CHECK_TIMEOUT, check).await;
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let detail = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(match e {
            crate::store::StoreError::Unavailable(_) => "store unreachable or locked".to_owned(),
            other => {
                tracing::warn!(error = %other, "readiness check failed");
                "store check failed".to_owned()
            }
        }),
        Err(_) => Some(format!("no answer within {} ms", CHECK_TIMEOUT.as_millis())),
    };
    Check {
        status: if detail.is_none() { "ok" } else { "down" }.into(),
        detail,
        latency_ms,
    }
}
