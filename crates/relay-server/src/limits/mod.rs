//! Per-caller rate limits for agent legs and suggestions (CONTRACT.md, Quota), keyed by user id,
//! and for signups, keyed by client address. With `[limits] url` they are counted in Redis across
//! instances (`redis`); these counters decide while Redis does not answer. The signin throttle
//! (`signin`) counts failed signins the same two ways. `[limits]` itself is `config::LimitsConfig`.

pub mod redis;
pub mod signin;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use self::redis::{SharedStore, wait_secs};
use crate::config::LimitsConfig;
use crate::error::ApiError;

/// One keyed limiter: `per_minute` sustained, bursts of `burst`.
pub struct CallerLimit {
    limiter: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
    /// The same quota in Redis: the limit's name in its keys, the emission interval and burst.
    shared: Option<(Arc<SharedStore>, &'static str)>,
    interval: Duration,
    burst: u32,
}

impl CallerLimit {
    pub fn new(per_minute: u32, burst: u32) -> Self {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
            clock: DefaultClock::default(),
            shared: None,
            interval: Duration::from_secs(60) / per_minute.get(),
            burst: burst.get(),
        }
    }

    /// `per_hour` in an hour, all of them at once if need be.
    pub fn per_hour(per_hour: u32) -> Self {
        let n = NonZeroU32::new(per_hour).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_hour(n).allow_burst(n)),
            clock: DefaultClock::default(),
            shared: None,
            interval: Duration::from_secs(3600) / n.get(),
            burst: n.get(),
        }
    }

    /// Counts this limit in `store` under `name`, across instances.
    pub fn shared(mut self, store: Option<&Arc<SharedStore>>, name: &'static str) -> Self {
        self.shared = store.map(|s| (s.clone(), name));
        self
    }

    /// Spends one cell of `caller`'s budget, or answers 429 with the wait: in Redis when it is
    /// configured and answers, else in this instance.
    pub async fn check(&self, caller: &str) -> Result<(), ApiError> {
        if let Some((store, name)) = &self.shared
            && let Some(decided) = store.rate(name, caller, self.interval, self.burst).await
        {
            return decided.map_err(|wait_ms| ApiError::rate_limited(wait_secs(wait_ms)));
        }
        self.check_local(caller)
    }

    fn check_local(&self, caller: &str) -> Result<(), ApiError> {
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
    pub agent: Arc<CallerLimit>,
    /// `POST /v1/messages/count_tokens`, with the agent legs' rate (`[limits] agent_per_minute`
    /// and `agent_burst`) counted apart, so that counting never takes a leg's place.
    pub count_tokens: CallerLimit,
    pub suggest: CallerLimit,
    /// Signups per client address (`[limits] signups_per_hour`).
    pub signup: CallerLimit,
    /// Device sign-ins started per client address (`POST /oauth/device_authorization`): each
    /// stores a code for ten minutes.
    pub device: CallerLimit,
}

impl Limits {
    /// `shared`: the Redis store of `[limits] url`, if any.
    pub fn new(config: &LimitsConfig, shared: Option<&Arc<SharedStore>>) -> Self {
        Self {
            agent: Arc::new(
                CallerLimit::new(config.agent_per_minute, config.agent_burst)
                    .shared(shared, "agent"),
            ),
            count_tokens: CallerLimit::new(config.agent_per_minute, config.agent_burst)
                .shared(shared, "count_tokens"),
            suggest: CallerLimit::new(config.suggest_per_minute, config.suggest_burst)
                .shared(shared, "suggest"),
            signup: CallerLimit::per_hour(config.signups_per_hour).shared(shared, "signup"),
            device: CallerLimit::new(config.device_per_minute, config.device_burst)
                .shared(shared, "device"),
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
            assert!(l.check_local("a").is_ok());
        }
        let err = l.check_local("a").unwrap_err();
        assert_eq!(err.code, relay_wire::ErrorCode::RateLimited);
        assert!(
            l.check_local("b").is_ok(),
            "another caller has its own budget"
        );
    }
}
