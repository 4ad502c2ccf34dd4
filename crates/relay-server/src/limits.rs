//! Per-caller rate limits for agent legs and suggestions (CONTRACT.md, Quota), keyed by user id,
//! and for signups, keyed by client address.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::LimitsConfig;
use crate::error::ApiError;

/// One keyed limiter: `per_minute` sustained, bursts of `burst`.
pub struct CallerLimit {
    limiter: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
}

impl CallerLimit {
    pub fn new(per_minute: u32, burst: u32) -> Self {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
            clock: DefaultClock::default(),
        }
    }

    /// `per_hour` in an hour, all of them at once if need be.
    pub fn per_hour(per_hour: u32) -> Self {
        let n = NonZeroU32::new(per_hour).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_hour(n).allow_burst(n)),
            clock: DefaultClock::default(),
        }
    }

    /// Spends one cell of `caller`'s budget, or answers 429 with the wait.
    pub fn check(&self, caller: &str) -> Result<(), ApiError> {
        let key = caller.to_owned();
        match self.limiter.check_key(&key) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait: Duration = not_until.wait_time_from(self.clock.now());
                if self.limiter.len() > 100_000 {
                    self.limiter.retain_recent();
                }
                Err(ApiError::rate_limited(wait.as_secs() + 1))
            }
        }
    }
}

/// Every per-caller limit.
pub struct Limits {
    pub agent: CallerLimit,
    pub suggest: CallerLimit,
    /// Signups per client address (`[limits] signups_per_hour`).
    pub signup: CallerLimit,
}

impl Limits {
    pub fn new(config: &LimitsConfig) -> Self {
        Self {
            agent: CallerLimit::new(config.agent_per_minute, config.agent_burst),
            suggest: CallerLimit::new(config.suggest_per_minute, config.suggest_burst),
            signup: CallerLimit::per_hour(config.signups_per_hour),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_then_refuses_per_caller() {
        let l = CallerLimit::new(60, 3);
        for _ in 0..3 {
            assert!(l.check("a").is_ok());
        }
        let err = l.check("a").unwrap_err();
        assert_eq!(err.code, relay_wire::ErrorCode::RateLimited);
        assert!(l.check("b").is_ok(), "another caller has its own budget");
    }
}
