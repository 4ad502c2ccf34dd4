//! Signin throttling: failed signins per email and per client address (CONTRACT.md, Quota).
//!
//! Each key keeps the times of its recent failures. A signin takes its place in the budget
//! *before* its password is checked (a reservation) and gives it back only when the password was
//! right, so however many arrive at once no more than the budget of wrong passwords are ever
//! checked per key per window (issue 12.3). A refused attempt is not checked at all, so a correct
//! guess made while locked is not revealed.
//!
//! An *email* locks after `failures` in the window, until the oldest is `window` old. An
//! *address* is only slowed (issue 42: everyone behind one proxy or NAT shares it): past
//! `failures` it waits a growing delay after its latest failure (1 s, 2 s, 4 s … at most a
//! minute), and locks only past `ADDRESS_LOCK_FACTOR` times `failures`. So a right password
//! for an account that is not locked still signs in from a throttled address after its delay.
//! An operator lifts an email's lock (`forgive`): its failures until then stop counting.
//!
//! With `[limits] url` the budgets live in Redis (one script per reservation, the same sliding
//! window), so they hold across instances; while Redis does not answer, this instance's own map
//! decides. An address's delay is always this instance's own.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::redis::{SharedStore, wait_secs};

/// Keys kept before forgotten failures are swept out.
const SWEEP_ABOVE: usize = 100_000;

/// An address locks only past this many times the email's budget of failures.
pub const ADDRESS_LOCK_FACTOR: usize = 10;

/// The longest delay an address waits after its latest failure, short of its lock.
const MAX_ADDRESS_DELAY: Duration = Duration::from_secs(60);

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
    /// Each set of keys reserved together, and where.
    parts: Vec<(Vec<String>, Place)>,
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
                        parts: vec![(keys.to_vec(), Place::Shared(member))],
                    }),
                    Err(wait_ms) => Err(wait_secs(wait_ms)),
                };
            }
        }
        self.reserve_local(keys)
    }

    /// A sign-in's reservation: `email` (`email:…`) under the lock budget, `address`
    /// (`addr:…`, when known) under its delay and its much larger lock budget. Refused: the
    /// seconds to wait.
    pub async fn reserve_signin(
        &self,
        email: &str,
        address: Option<&str>,
    ) -> Result<Reservation<'_>, u64> {
        let Some(address) = address else {
            return self.reserve(&[email.to_owned()]).await;
        };
        // The email is asked first, so that a locked one answers with its own (long) wait and
        // not the address's few seconds: `relay login` prints the wait, and one who waited the
        // shorter time would only be told again (issue 42).
        let delay = self
            .address_delay(address, Instant::now())
            .map(|d| d.as_secs() + 1);
        let mut held = match self.reserve(&[email.to_owned()]).await {
            Ok(held) => held,
            Err(wait) => return Err(wait.max(delay.unwrap_or(0))),
        };
        if let Some(wait) = delay {
            held.release().await;
            return Err(wait);
        }
        let lock = self.budget.saturating_mul(ADDRESS_LOCK_FACTOR);
        let address_part = match self.reserve_budget(address, lock).await {
            Ok(part) => part,
            Err(wait) => {
                held.release().await;
                return Err(wait);
            }
        };
        held.parts.push(address_part);
        // The delay reads this instance's own record of the address, kept in both modes.
        if matches!(held.parts.last(), Some((_, Place::Shared(_)))) {
            let at = Instant::now();
            self.map()
                .entry(address.to_owned())
                .or_default()
                .push_back(at);
            held.parts
                .push((vec![address.to_owned()], Place::Local(at)));
        }
        Ok(held)
    }

    /// One key under its own `budget`, in Redis when it answers, else here.
    async fn reserve_budget(&self, key: &str, budget: usize) -> Result<(Vec<String>, Place), u64> {
        let keys = vec![key.to_owned()];
        if let Some(store) = &self.shared {
            let budget32 = u32::try_from(budget).unwrap_or(u32::MAX);
            if let Some(decided) = store.reserve(&keys, budget32, self.window).await {
                return decided
                    .map(|member| (keys, Place::Shared(member)))
                    .map_err(wait_secs);
            }
        }
        let now = Instant::now();
        let mut map = self.map();
        let q = map.entry(key.to_owned()).or_default();
        while q
            .front()
            .is_some_and(|t| now.duration_since(*t) >= self.window)
        {
            q.pop_front();
        }
        if q.len() >= budget
            && let Some(oldest) = q.front()
        {
            return Err((*oldest + self.window)
                .saturating_duration_since(now)
                .as_secs()
                + 1);
        }
        q.push_back(now);
        Ok((keys, Place::Local(now)))
    }

    /// How long `address` must still wait after its latest failure: nothing up to `budget`
    /// failures in the window, then 1 s doubling with each further one, at most a minute.
    fn address_delay(&self, address: &str, now: Instant) -> Option<Duration> {
        let map = self.map();
        let q = map.get(address)?;
        let recent = q
            .iter()
            .filter(|t| now.duration_since(**t) < self.window)
            .count();
        if recent < self.budget {
            return None;
        }
        let doublings = u32::try_from(recent - self.budget)
            .unwrap_or(u32::MAX)
            .min(16);
        let delay = Duration::from_secs(1u64 << doublings).min(MAX_ADDRESS_DELAY);
        let latest = q.back()?;
        let wait = (*latest + delay).saturating_duration_since(now);
        (!wait.is_zero()).then_some(wait)
    }

    /// Forgets `key`'s failures up to `until` (Unix seconds): an operator lifted its lock.
    pub async fn forgive(&self, key: &str, until: f64) {
        if let Some(store) = &self.shared {
            store.forgive(key, (until * 1000.0) as i64).await;
        }
        // Stored times are instants: a failure is forgiven when it is older than the lifting.
        let age = (crate::clock::now() - until).max(0.0);
        let now = Instant::now();
        let mut map = self.map();
        if let Some(q) = map.get_mut(key) {
            q.retain(|t| now.duration_since(*t).as_secs_f64() < age);
        }
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
            parts: vec![(keys.to_vec(), Place::Local(now))],
        })
    }
}

impl Reservation<'_> {
    /// Gives the place back: the password was right, or it was never checked (a store failure).
    pub async fn release(self) {
        for (keys, place) in &self.parts {
            match place {
                Place::Shared(member) => {
                    if let Some(store) = &self.throttle.shared {
                        store.release(keys, member).await;
                    }
                }
                Place::Local(at) => {
                    let mut map = self.throttle.map();
                    for key in keys {
                        if let Some(q) = map.get_mut(key)
                            && let Some(i) = q.iter().position(|t| t == at)
                        {
                            q.remove(i);
                        }
                    }
                }
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

    #[tokio::test]
    async fn an_address_is_slowed_and_locked_only_much_later() {
        let t = SigninThrottle::new(2, Duration::from_secs(900));
        // Two failures for two emails: neither is locked, the address is not slowed yet.
        let _a = t
            .reserve_signin("email:a@x.com", Some("addr:1.2.3.4"))
            .await
            .unwrap();
        let _b = t
            .reserve_signin("email:b@x.com", Some("addr:1.2.3.4"))
            .await
            .unwrap();
        // Past the budget the address waits a second after its latest failure…
        let wait = t
            .reserve_signin("email:c@x.com", Some("addr:1.2.3.4"))
            .await
            .err();
        assert_eq!(wait, Some(1), "a delay of one second, in whole seconds");
        // …another address does not,
        assert!(
            t.reserve_signin("email:c@x.com", Some("addr:5.6.7.8"))
                .await
                .is_ok()
        );
        // and once the delay has passed (here: forgotten), a right password goes through.
        let ok = t
            .reserve_signin("email:d@x.com", Some("addr:9.9.9.9"))
            .await
            .unwrap();
        ok.release().await;
        // The email's own lock holds whatever the address.
        let _c = t
            .reserve_signin("email:e@x.com", Some("addr:7.7.7.1"))
            .await
            .unwrap();
        let _d = t
            .reserve_signin("email:e@x.com", Some("addr:7.7.7.2"))
            .await
            .unwrap();
        assert!(
            t.reserve_signin("email:e@x.com", Some("addr:7.7.7.3"))
                .await
                .is_err()
        );
        // The refusal names the lock's wait, not a slowed address's second.
        for _ in 0..2 {
            let _ = t
                .reserve_signin("email:f@x.com", Some("addr:7.7.7.9"))
                .await
                .unwrap();
        }
        let wait = t
            .reserve_signin("email:f@x.com", Some("addr:7.7.7.9"))
            .await
            .err()
            .unwrap();
        assert!(wait > 800 && wait <= 901, "{wait}");
        // An operator lifts it: the failures before now stop counting.
        tokio::time::sleep(Duration::from_millis(20)).await;
        t.forgive("email:e@x.com", crate::clock::now()).await;
        assert!(
            t.reserve_signin("email:e@x.com", Some("addr:7.7.7.3"))
                .await
                .is_ok()
        );
    }
}
