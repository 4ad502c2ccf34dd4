//! `[telemetry]`: where traces go (the exporter itself lives in `crate::telemetry`).

use serde::Deserialize;

/// `[telemetry]`: where traces go. Without an endpoint nothing is exported.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// An OTLP/HTTP collector, e.g. `http://collector:4318`; `/v1/traces` is appended.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of every span.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            service_name: "relay".to_owned(),
        }
    }
}
