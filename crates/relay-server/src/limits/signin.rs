//! Signin throttling: failed signins per email and per client address (CONTRACT.md, Quota).
//!
//! Each key keeps the times of its recent failures (at most `failures` of them). A signin takes
//! its place in the budget *before* its password is checked (a reservation) and gives it back
//! only when the password was right, so however many arrive at once no more than `failures` wrong
//! passwords are ever checked per key per window (issue 12.3). A refused attempt is not checked
//! at all, so a correct guess made while locked is not revealed. A lock lasts until the oldest
//! counted failure is `window` old.
//!
//! With `[limits] url` the budget lives in Redis (one script per reservation, the same sliding
//! window), so it holds across instances; while Redis does not answer, this instance's own map
//! decides.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::redis::{SharedStore, wait_secs};

/// Keys kept before forgotten failures are swept out.
const SWEEP_ABOVE: usize = 100_000;

pub struct SigninThrottle {
    budget: usize,
    window: Duration,
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
    shared: Option<Arc<SharedStore>>,
}

/// A place taken in the failure budget of each key; it stays spent unless `release`d.
#[must_use = "a reservation is released only on success"]
pub struct Reservation<'a> {
    throttle: &'a SigninThrottle,
    keys: Vec<String>,
    place: Place,
}

/// Where the place was taken.
enum Place {
    Local(Instant),
    /// In Redis, under this member of each key's set.
    Shared(String),
}

impl SigninThrottle {
    /// `failures` allowed in `window` per key.
    pub fn new(failures: u32, window: Duration) -> Self {
        Self {
            budget: usize::try_from(failures.max(1)).unwrap_or(usize::MAX),
            window,
            failures: Mutex::new(HashMap::new()),
            shared: None,
        }
    }

    /// Keeps the budget in `store` (Redis), shared by every instance.
    pub fn shared(mut self, store: Option<&Arc<SharedStore>>) -> Self {
        self.shared = store.cloned();
        self
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, VecDeque<Instant>>> {
        // A panic while holding the lock leaves the map consistent (every change is one push or pop).
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes one place in every key's budget, or answers the seconds to wait when any is spent:
    /// in Redis when it is configured and answers, else in this instance.
    pub async fn reserve(&self, keys: &[String]) -> Result<Reservation<'_>, u64> {
        if let Some(store) = &self.shared {
            let budget = u32::try_from(self.budget).unwrap_or(u32::MAX);
            if let Some(decided) = store.reserve(keys, budget, self.window).await {
                return match decided {
                    Ok(member) => Ok(Reservation {
                        throttle: self,
                        keys: keys.to_vec(),
                        place: Place::Shared(member),
                    }),
                    Err(wait_ms) => Err(wait_secs(wait_ms)),
                };
            }
        }
        self.reserve_local(keys)
    }

    fn reserve_local(&self, keys: &[String]) -> Result<Reservation<'_>, u64> {
        let now = Instant::now();
        let window = self.window;
        let expired = |q: &mut VecDeque<Instant>| {
            while q.front().is_some_and(|t| now.duration_since(*t) >= window) {
                q.pop_front();
            }
        };
        let mut map = self.map();
        if map.len() > SWEEP_ABOVE {
            map.retain(|_, q| {
                expired(q);
                !q.is_empty()
            });
        }
        let mut wait: Option<Duration> = None;
        for key in keys {
            if let Some(q) = map.get_mut(key) {
                expired(q);
                if q.len() >= self.budget
                    && let Some(oldest) = q.front()
                {
                    let d = (*oldest + window).saturating_duration_since(now);
                    wait = Some(wait.map_or(d, |w| w.max(d)));
                }
            }
        }
        if let Some(d) = wait {
            return Err(d.as_secs() + 1);
        }
        for key in keys {
            map.entry(key.clone()).or_default().push_back(now);
        }
        Ok(Reservation {
            throttle: self,
            keys: keys.to_vec(),
            place: Place::Local(now),
        })
    }
}

impl Reservation<'_> {
    /// Gives the place back: the password was right, or it was never checked (a store failure).
    pub async fn release(self) {
        let at = match &self.place {
            Place::Local(at) => *at,
            Place::Shared(member) => {
                if let Some(store) = &self.throttle.shared {
                    store.release(&self.keys, member).await;
                }
                return;
            }
        };
        let mut map = self.throttle.map();
        for key in &self.keys {
            if let Some(q) = map.get_mut(key)
                && let Some(i) = q.iter().position(|t| *t == at)
            {
                q.remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn locks_after_the_budget_and_only_that_key() {
        let t = SigninThrottle::new(3, Duration::from_secs(900));
        let keys = vec!["email:a@x.com".to_owned(), "addr:1.2.3.4".to_owned()];
        let held: Vec<_> = (0..3).map(|_| t.reserve_local(&keys).unwrap()).collect();
        let wait = t.reserve_local(&keys).err().unwrap();
        assert!(wait > 0 && wait <= 901, "{wait}");
        assert!(t.reserve_local(&["email:b@x.com".to_owned()]).is_ok());
        // A released place (a right password) is free again.
        held.into_iter().next().unwrap().release().await;
        assert!(t.reserve_local(&keys).is_ok());
        assert!(t.reserve_local(&keys).is_err());
    }
}
