//! The reference client end to end: the real `relay` binary (and the `relay-client` crate) against a
//! real relay whose model is a scripted upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod account;
mod agent;
mod claude_login;
mod commands;
mod crate_api;
mod fake_anthropic;
mod first_hour;
mod gateway_world;
mod hardening;
#[path = "../support/mod.rs"]
mod harness;
mod launch;
mod live_view;
mod login_flow;
mod panes;
mod real_agents;
mod rules;
mod session;
mod support;
mod terminal;
mod tmux;
mod tools;
