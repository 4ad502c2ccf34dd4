//! HTTP tests of the service: each starts the app on port 0 and calls it with a real client.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod accounts;
mod agent;
mod agent_faults;
mod compat;
mod compat_controls;
mod compat_sdk;
mod docs;
mod fake_upstream;
mod hardening;
mod helpers;
mod memory;
mod memory_store;
mod operations;
mod search;
mod security;
mod suggest;
