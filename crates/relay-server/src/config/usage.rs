//! `[usage]`: how long the usage ledger keeps its records and how it batches their writes.

use serde::Deserialize;

/// `[usage]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UsageConfig {
    /// Records older than this many days are pruned.
    pub retention_days: u32,
    /// A batch of records is written once it holds this many...
    pub batch_size: usize,
    /// ...or this long after its first record arrived, whichever comes first.
    pub flush_ms: u64,
}

impl Default for UsageConfig {
    fn default() -> Self {
        Self {
            retention_days: 90,
            batch_size: 256,
            flush_ms: 200,
        }
    }
}

impl UsageConfig {
    /// The message naming the key at fault, if any.
    pub fn problem(&self) -> Option<String> {
        if self.retention_days == 0 {
            return Some("usage.retention_days must be at least 1".into());
        }
        if self.batch_size == 0 || self.batch_size > 10_000 {
            return Some("usage.batch_size must be between 1 and 10000".into());
        }
        if self.flush_ms == 0 || self.flush_ms > 60_000 {
            return Some("usage.flush_ms must be between 1 and 60000".into());
        }
        None
    }
}
