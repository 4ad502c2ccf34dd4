//! Liveness and readiness answers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /healthz`: `{status: "ok"}` whenever the process answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
}

/// `GET /readyz`: `ready` with 200 when every check passes, `unready` with 503 otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Readiness {
    pub status: String,
    /// One entry per dependency (`memory_store`, `auth_store`, and `limits` with a shared limits store).
    pub checks: BTreeMap<String, Check>,
}

/// One readiness check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Check {
    /// `ok`, `down`, or `degraded` (working without the dependency; does not fail readiness).
    pub status: String,
    /// Why it is down, in operator terms (no credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// How long the check took, in milliseconds.
    pub latency_ms: f64,
}
