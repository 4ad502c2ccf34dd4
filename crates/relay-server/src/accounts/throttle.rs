//! Signin throttling: failed signins per email and per client address (CONTRACT.md, Quota).
//!
//! governor counts the failures (GCRA: a burst of N, refilled over the window). governor cannot peek
//! without spending a cell, so when it refuses we remember until when, and refuse any attempt for
//! that key before its password is checked: a correct guess made while locked is not revealed.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

pub struct SigninThrottle {
    failures: DefaultKeyedRateLimiter<String>,
    locked_until: Mutex<HashMap<String, Instant>>,
    clock: DefaultClock,
}

impl SigninThrottle {
    /// `failures` allowed in `window` per key.
    pub fn new(failures: u32, window: Duration) -> Self {
        let burst = NonZeroU32::new(failures).unwrap_or(NonZeroU32::MIN);
        let per_cell = window / burst.get();
        let quota = Quota::with_period(per_cell.max(Duration::from_millis(1)))
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(burst);
        Self {
            failures: RateLimiter::keyed(quota),
            locked_until: Mutex::new(HashMap::new()),
            clock: DefaultClock::default(),
        }
    }

    /// Seconds to wait when any of `keys` is locked.
    pub fn locked(&self, keys: &[String]) -> Option<u64> {
        let now = Instant::now();
        let map = self.locked_until.lock().ok()?;
        keys.iter()
            .filter_map(|k| map.get(k))
            .filter(|until| **until > now)
            .map(|until| until.duration_since(now).as_secs() + 1)
            .max()
    }

    /// Records a failed signin for each key; returns the wait when the budget is now spent.
    pub fn record_failure(&self, keys: &[String]) -> Option<u64> {
        let mut wait: Option<Duration> = None;
        for key in keys {
            if let Err(not_until) = self.failures.check_key(key) {
                let d = not_until.wait_time_from(self.clock.now());
                wait = Some(wait.map_or(d, |w| w.max(d)));
                if let Ok(mut map) = self.locked_until.lock() {
                    let now = Instant::now();
                    map.retain(|_, until| *until > now);
                    map.insert(key.clone(), now + d);
                }
            }
        }
        if self.failures.len() > 100_000 {
            self.failures.retain_recent();
        }
        wait.map(|d| d.as_secs() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_the_budget_and_only_that_key() {
        let t = SigninThrottle::new(3, Duration::from_secs(900));
        let keys = vec!["email:a@x.com".to_owned(), "addr:1.2.3.4".to_owned()];
        for _ in 0..3 {
            assert_eq!(t.record_failure(&keys), None);
        }
        assert!(t.locked(&keys).is_none());
        let wait = t.record_failure(&keys).unwrap();
        assert!(wait > 0 && wait <= 301, "{wait}");
        assert!(t.locked(&keys).is_some());
        assert!(t.locked(&["email:b@x.com".to_owned()]).is_none());
    }
}
