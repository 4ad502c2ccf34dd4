//! `[memory]`: the notes store, the budget of notes injected into a leg, and the embeddings that
//! rank them with the lexical ranker (optional).

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
    /// Notes and questions embedded by a configured provider and fused into the ranking (issue
    /// 44); without it ranking is lexical.
    pub embeddings: Option<EmbeddingsConfig>,
    /// How long a leg waits for its question's embedding before it ranks lexically.
    pub embed_timeout_ms: u64,
}

/// `[memory] embeddings = { provider = "…", model = "…" }`: a provider of `[[providers]]` whose
/// OpenAI-compatible `POST /v1/embeddings` (OpenAI, Ollama, llama.cpp, vLLM) embeds notes and
/// questions with `model`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsConfig {
    pub provider: String,
    pub model: String,
}

impl MemoryConfig {
    /// How long a leg waits for its notes: the store's deadline, plus the question's embedding
    /// when embeddings are on (a failed or slow embedding falls back to lexical ranking within
    /// that time, so the store keeps its own deadline).
    pub fn inject_deadline(&self) -> std::time::Duration {
        let embed = if self.embeddings.is_some() {
            self.embed_timeout_ms
        } else {
            0
        };
        std::time::Duration::from_millis(self.inject_deadline_ms.saturating_add(embed))
    }
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
            embeddings: None,
            embed_timeout_ms: 300,
        }
    }
}
