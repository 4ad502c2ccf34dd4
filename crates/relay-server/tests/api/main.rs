//! HTTP tests of the service: each starts the app on port 0 and calls it with a real client.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod accounts;
mod admin;
mod agent;
mod agent_faults;
mod agent_settings;
mod agents_cli;
mod caching;
mod caching_fake;
mod claude_code;
mod claude_gateway;
mod codex_default_model;
mod compat;
mod compat_controls;
mod compat_sdk;
mod console;
mod docs;
mod fake_upstream;
mod hardening;
mod helpers;
mod hostile_stream;
mod keys;
mod ledger_hardening;
mod malformed_calls;
mod mcp;
mod mcp_sdk;
mod memory;
mod memory_store;
mod metrics;
mod models_paging;
mod operations;
mod policy;
mod responses;
mod responses_additional_tools;
mod responses_replay;
mod responses_same_family;
mod responses_sdk;
mod search;
mod security;
mod signin;
mod suggest;
mod upstream_h2;
mod usage;
