//! Relay: the HTTP service an AI coding terminal talks to, as a library.
//!
//! `Relay::from_config` opens the stores and builds the state, `Relay::router` the app, and `serve`
//! runs it on a bound listener until a shutdown future resolves.

pub mod accounts;
pub mod admin;
pub mod agent;
pub mod app;
pub mod clock;
pub mod compat;
pub mod config;
pub mod console;
pub mod docs;
pub mod domain;
pub mod error;
pub mod examples;
pub mod extract;
pub mod guard;
pub mod health;
pub mod limits;
pub mod memory;
pub mod metrics;
pub mod operator;
pub mod providers;
pub mod routes;
pub mod search;
pub mod server;
pub mod shared_limits;
pub mod shutdown;
pub mod state;
pub mod store;
pub mod suggest;
pub mod telemetry;
pub mod usage;
pub mod waitlist;

pub use app::{Relay, shutdown_signal};
pub use config::Config;
pub use server::serve;
pub use state::AppState;
pub use store::Stores;
