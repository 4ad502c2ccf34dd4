//! Signin throttling: failed signins per email and per client address (CONTRACT.md, Quota).
//!
//! Each key keeps the times of its recent failures (at most `failures` of them). A signin takes
//! its place in the budget *before* its password is checked (a reservation) and gives it back
//! only when the password was right, so however many arrive at once no more than `failures` wrong
//! passwords are ever checked per key per window (issue 12.3). A refused attempt is not checked
//! at all, so a correct guess made while locked is not revealed. A lock lasts until the oldest
//! counted failure is `window` old.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Keys kept before forgotten failures are swept out.
const SWEEP_ABOVE: usize = 100_000;

pub struct SigninThrottle {
    budget: usize,
    window: Duration,
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

/// A place taken in the failure budget of each key; it stays spent unless `release`d.
#[must_use = "a reservation is released only on success"]
pub struct Reservation<'a> {
    throttle: &'a SigninThrottle,
    keys: Vec<String>,
    at: Instant,
}

impl SigninThrottle {
    /// `failures` allowed in `window` per key.
    pub fn new(failures: u32, window: Duration) -> Self {
        Self {
            budget: usize::try_from(failures.max(1)).unwrap_or(usize::MAX),
            window,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, VecDeque<Instant>>> {
        // A panic while holding the lock leaves the map consistent (every change is one push or pop).
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes one place in every key's budget, or answers the seconds to wait when any is spent.
    pub fn reserve(&self, keys: &[String]) -> Result<Reservation<'_>, u64> {
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
            at: now,
        })
    }
}

impl Reservation<'_> {
    /// Gives the place back: the password was right, or it was never checked (a store failure).
    pub fn release(self) {
        let mut map = self.throttle.map();
        for key in &self.keys {
            if let Some(q) = map.get_mut(key)
                && let Some(i) = q.iter().position(|t| *t == self.at)
            {
                q.remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_the_budget_and_only_that_key() {
        let t = SigninThrottle::new(3, Duration::from_secs(900));
        let keys = vec!["email:a@x.com".to_owned(), "addr:1.2.3.4".to_owned()];
        let held: Vec<_> = (0..3).map(|_| t.reserve(&keys).unwrap()).collect();
        let wait = t.reserve(&keys).err().unwrap();
        assert!(wait > 0 && wait <= 901, "{wait}");
        assert!(t.reserve(&["email:b@x.com".to_owned()]).is_ok());
        // A released place (a right password) is free again.
        held.into_iter().next().unwrap().release();
        assert!(t.reserve(&keys).is_ok());
        assert!(t.reserve(&keys).is_err());
    }
}
