//! Relay: the HTTP service an AI coding terminal talks to, as a library.
//!
//! `Relay::from_config` opens the stores and builds the state, `Relay::router` the app, and `serve`
//! runs it on a bound listener until a shutdown future resolves. The HTTP layer is `http/`; the
//! modules beside it are the services it calls and never import it.

pub mod accounts;
pub mod agent_telemetry;
pub mod clock;
pub mod config;
pub mod domain;
pub mod embeddings;
pub mod error;
pub mod http;
pub mod legs;
pub mod limits;
pub mod metrics;
pub mod operator;
pub mod policy;
pub mod providers;
pub mod search;
pub mod store;
pub mod telemetry;
pub mod usage;

pub use config::Config;
pub use http::app::{Relay, shutdown_signal};
pub use http::server::serve;
pub use http::state::AppState;
pub use store::Stores;
