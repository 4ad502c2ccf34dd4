//! `[memory]`: the notes store and the budget of notes injected into a leg.

use serde::Deserialize;

/// The default store: one SQLite file in the data directory.
pub const DEFAULT_STORE_URL: &str = "sqlite://relay-data/relay.db";

/// Pool size of a store when the file names none (`[memory]` and `[auth]` alike).
pub(super) const DEFAULT_MAX_CONNECTIONS: u32 = 8;

/// How long a store call waits by default before the store counts as unavailable.
pub(super) const DEFAULT_BUSY_TIMEOUT_MS: u64 = 5_000;

/// `[memory]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// `sqlite://PATH` or `postgres://…`.
    pub url: String,
    /// Connection pool size.
    pub max_connections: u32,
    /// How long a store call waits for a lock or a connection before the store counts as unavailable.
    pub busy_timeout_ms: u64,
    /// How many of a project's newest notes recall returns.
    pub recall_limit: u32,
    /// Injection budget: at most this many notes per leg.
    pub inject_max_notes: u32,
    /// Injection budget: at most this many characters of notes per leg.
    pub inject_max_chars: u32,
    /// A memory store slower than this injects nothing and the leg goes on.
    pub inject_deadline_ms: u64,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            url: DEFAULT_STORE_URL.to_owned(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
            recall_limit: 200,
            inject_max_notes: 8,
            inject_max_chars: 6_000,
            inject_deadline_ms: 250,
        }
    }
}
