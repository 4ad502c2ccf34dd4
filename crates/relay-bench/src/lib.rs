//! Relay's benchmark harness as a library: `run` drives the whole pipeline (mock upstream, Relay,
//! a load generator, LiteLLM) and returns a `Report`; the `relay-bench` binary and the smoke test
//! both call it.

pub mod cache_mock;
pub mod child;
pub mod data;
pub mod doors;
pub mod floor;
pub mod inject;
pub mod litellm;
pub mod load;
pub mod memory;
pub mod memory_fusion;
pub mod mock;
pub mod procfs;
pub mod relay;
pub mod report;
pub mod run;
pub mod streams;
pub mod tls;

pub use report::Report;
pub use run::{Options, Scale, profile, run};
