//! The HTTP layer: handlers, extractors, the guard, the route list, the state they share and the
//! app's composition (`app`, `server`, `shutdown`).
//!
//! The rule: nothing outside `http/` imports an axum extractor or `AppState`; the services below
//! (accounts, store, providers, search, limits, metrics) know nothing of HTTP.

pub mod accounts;
pub mod admin;
pub mod agent;
pub mod app;
pub mod compat;
pub mod console;
pub mod docs;
pub mod extract;
pub mod guard;
pub mod health;
pub mod keys;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod openapi_examples;
pub mod routes;
pub mod search;
pub mod server;
pub mod shutdown;
pub mod signin;
pub mod state;
pub mod suggest;
pub mod telemetry;
pub mod usage;
pub mod usage_legs;
pub mod waitlist;
