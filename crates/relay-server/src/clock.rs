//! Wall-clock time as stored: Unix seconds with a fraction.

use std::sync::atomic::{AtomicI64, Ordering};

/// Now, in Unix seconds.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The service's clock for what counts by calendar period (the unit quota's month): the
/// system's, moved forward by an offset that only `advance` changes, so a test can cross a
/// month without waiting for one (issue 42). Each `AppState` has its own.
#[derive(Debug, Default)]
pub struct Clock {
    offset_secs: AtomicI64,
}

impl Clock {
    /// Now, in Unix seconds, offset.
    pub fn now(&self) -> f64 {
        now() + self.offset_secs.load(Ordering::Relaxed) as f64
    }

    /// Moves this clock `secs` forward (negative: back).
    pub fn advance(&self, secs: i64) {
        self.offset_secs.fetch_add(secs, Ordering::Relaxed);
    }
}
