//! `[usage]`: whether the usage ledger records legs, how long it keeps its records and how it
//! batches their writes.

use serde::Deserialize;

/// `[usage]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UsageConfig {
    /// Record each leg; `false` records nothing (the usage endpoints answer from what is already
    /// stored, and budgets no longer grow).
    pub ledger: bool,
    /// Records older than this many days are pruned.
    pub retention_days: u32,
    /// A batch of records is written once it holds this many...
    pub batch_size: usize,
    /// ...or this long after its first record arrived, whichever comes first.
    pub flush_ms: u64,
    /// After a client leaves a streamed call, the provider's stream is read this much longer
    /// for its final usage (the tokens it counted are recorded, not an estimate); 0 stops at once.
    pub drain_ms: u64,
}

impl Default for UsageConfig {
    fn default() -> Self {
        Self {
            ledger: true,
            retention_days: 90,
            batch_size: 256,
            flush_ms: 200,
            drain_ms: 5_000,
        }
    }
}

impl UsageConfig {
    /// The message naming the key at fault, if any.
    pub fn problem(&self) -> Option<String> {
        self.problem_with(-1)
    }

    /// `problem`, knowing `[auth] default_token_budget` (-1 when unlimited or in open mode): a
    /// budget cannot be kept without the ledger, which is what counts the tokens.
    pub fn problem_with(&self, default_token_budget: i64) -> Option<String> {
        if !self.ledger && default_token_budget >= 0 {
            return Some(
                "usage.ledger = false cannot count auth.default_token_budget or auth.default_spend_budget_usd: set them to -1 or turn the ledger on".into(),
            );
        }
        if self.retention_days == 0 {
            return Some("usage.retention_days must be at least 1".into());
        }
        if self.batch_size == 0 || self.batch_size > 10_000 {
            return Some("usage.batch_size must be between 1 and 10000".into());
        }
        if self.drain_ms > 120_000 {
            return Some("usage.drain_ms must be at most 120000".into());
        }
        if self.flush_ms == 0 || self.flush_ms > 60_000 {
            return Some("usage.flush_ms must be between 1 and 60000".into());
        }
        None
    }
}
