//! Every metric Relay exports (declared in `registry`), the Prometheus text formats and the process
//! collector. The request-counting middleware and `/metrics` are in `http/metrics.rs`.
//!
//! The registry belongs to one app (no global recorder), so tests and several apps in one process
//! never mix their counts.

pub mod format;
mod process;
pub mod registry;

pub use registry::{
    BuildLabels, HttpLabels, LegLabels, Metrics, ModelLabels, RouteLabels, TokenLabels,
};
