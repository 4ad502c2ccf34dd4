//! Relay's wire format: every request, response, NDJSON event and machine code a client sees.
//!
//! This crate does no I/O so a client can depend on it. Shapes here are frozen (spec §9): fields may be
//! added as optional, never removed or renamed.

pub mod account;
pub mod admin;
pub mod agent;
pub mod emptied;
pub mod error;
pub mod health;
pub mod memory;
pub mod signin;
pub mod suggest;
pub mod tools;

pub use error::{ErrorBody, ErrorCode};

/// `{ok: true}`: the answer of signout and the waitlist.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct OkResponse {
    pub ok: bool,
}

impl OkResponse {
    pub const fn yes() -> Self {
        Self { ok: true }
    }
}
