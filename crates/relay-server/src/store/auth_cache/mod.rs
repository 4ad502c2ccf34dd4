//! A bounded in-process cache of token hash -> account in front of an `AuthStore`, so an
//! authenticated request costs no store statement when its session was seen before.
//!
//! The cache never outlives a change it depends on. In this process, signout, `update_user` and
//! `delete_user` evict as they return. Changes made by other processes reach it through the
//! backend's `Freshness`: on SQLite a one-row version counter that triggers move (read per request
//! without the sqlx worker hop), on PostgreSQL `LISTEN relay_auth` fed by triggers, trusted only
//! once it has applied the version that a batched per-request read of such a row finds. Whenever
//! the backend cannot vouch for the cache (the version cannot be read, the listener is
//! disconnected) it is bypassed and every lookup goes to the store, as before the cache existed.
//! Session expiry is checked on every hit against the expiry read with the account. `used` in a
//! cached account is whatever it was when cached: `GET /v1/me` reads the account through
//! `session_user_fresh`, and admission is its own conditional `UPDATE`.

pub mod postgres;
pub mod sqlite;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{Admission, AuthStore, NewUser, StoreResult, User, UserChanges};

/// Sessions kept at most; past it the least useful are dropped (and read again when next used).
pub const CAPACITY: usize = 10_000;

/// Whether the cache may be used now, and under which version of the shared state.
#[async_trait]
pub trait Freshness: Send + Sync {
    /// `Some(version)` when the cache may answer: a version other than the last one seen means
    /// another process changed sessions or accounts, so the cache is dropped first. `None` when
    /// nothing vouches for the cache now: the lookup goes to the store.
    async fn version(&self) -> Option<u64>;
}

#[derive(Clone)]
struct Entry {
    user: User,
    expires_at: f64,
}

/// The cache proper, shared with whatever evicts from outside a request (the PostgreSQL listener).
pub struct SessionCache {
    entries: quick_cache::sync::Cache<String, Arc<Entry>>,
    /// Moved by every eviction: a lookup that read the store before an eviction must not put what
    /// it read into the cache after it. Fills and evictions take `fill` so the check and the insert
    /// are one step; hits take no lock.
    generation: AtomicU64,
    /// The `Freshness` version the entries were read under.
    version: AtomicU64,
    fill: Mutex<()>,
}

impl SessionCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: quick_cache::sync::Cache::new(capacity),
            generation: AtomicU64::new(0),
            version: AtomicU64::new(u64::MAX),
            fill: Mutex::new(()),
        }
    }

    /// Drops the session of `token_hash`.
    pub fn evict(&self, token_hash: &str) {
        let _fill = self.fill.lock();
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries.remove(token_hash);
    }

    /// Drops every session (an account changed: whichever of its sessions are cached go).
    pub fn clear(&self) {
        let _fill = self.fill.lock();
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries.clear();
    }

    /// Drops everything when the shared state moved to another version since the entries were read.
    fn observe(&self, version: u64) {
        if self.version.load(Ordering::SeqCst) != version {
            let _fill = self.fill.lock();
            self.generation.fetch_add(1, Ordering::SeqCst);
            self.entries.clear();
            self.version.store(version, Ordering::SeqCst);
        }
    }

    fn get(&self, token_hash: &str, now: f64) -> Option<User> {
        self.entries
            .get(token_hash)
            .filter(|e| e.expires_at > now)
            .map(|e| e.user.clone())
    }

    /// Keeps what a lookup read, unless something was evicted since it began (`generation` then).
    fn fill(&self, token_hash: &str, entry: Entry, generation: u64, version: u64) {
        let _fill = self.fill.lock();
        if self.generation.load(Ordering::SeqCst) == generation
            && self.version.load(Ordering::SeqCst) == version
        {
            self.entries.insert(token_hash.to_owned(), Arc::new(entry));
        }
    }

    /// How many sessions are cached (for tests and metrics).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An `AuthStore` with the session cache in front; everything but session lookups passes through.
pub struct CachedAuth {
    inner: Arc<dyn AuthStore>,
    cache: Arc<SessionCache>,
    freshness: Box<dyn Freshness>,
}

impl CachedAuth {
    pub fn new(
        inner: Arc<dyn AuthStore>,
        cache: Arc<SessionCache>,
        freshness: Box<dyn Freshness>,
    ) -> Self {
        Self {
            inner,
            cache,
            freshness,
        }
    }
}

/// `inner` behind a cache that the SQLite file at `url` keeps fresh across processes.
pub fn over_sqlite(url: &str, inner: Arc<dyn AuthStore>) -> anyhow::Result<Arc<dyn AuthStore>> {
    let options = <sqlx::sqlite::SqliteConnectOptions as std::str::FromStr>::from_str(url)
        .map_err(|e| anyhow::anyhow!("cannot parse SQLite URL: {e}"))?;
    let version = sqlite::SqliteVersion::open(options.get_filename())?;
    Ok(Arc::new(CachedAuth::new(
        inner,
        Arc::new(SessionCache::new(CAPACITY)),
        Box::new(version),
    )))
}

/// `inner` behind a cache that notifications from the PostgreSQL database at `url`, checked
/// against its `auth_version` row read on the store's `held` connections, keep fresh across
/// instances.
pub fn over_postgres(
    url: &str,
    held: &Arc<super::postgres::held::Held>,
    inner: Arc<dyn AuthStore>,
) -> anyhow::Result<Arc<dyn AuthStore>> {
    let cache = Arc::new(SessionCache::new(CAPACITY));
    let listened = postgres::PgListened::start(url, held, cache.clone())?;
    Ok(Arc::new(CachedAuth::new(inner, cache, Box::new(listened))))
}

#[async_trait]
impl AuthStore for CachedAuth {
    async fn create_user(&self, user: NewUser) -> StoreResult<User> {
        self.inner.create_user(user).await
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<(User, String)>> {
        self.inner.user_by_email(email).await
    }

    async fn list_users(&self) -> StoreResult<Vec<User>> {
        self.inner.list_users().await
    }

    async fn list_users_page(&self, limit: u32, offset: u64) -> StoreResult<(u64, Vec<User>)> {
        self.inner.list_users_page(limit, offset).await
    }

    async fn update_user(&self, email: &str, changes: UserChanges) -> StoreResult<Option<User>> {
        let changed = self.inner.update_user(email, changes).await;
        self.cache.clear();
        changed
    }

    async fn delete_user(&self, email: &str) -> StoreResult<Option<User>> {
        let deleted = self.inner.delete_user(email).await;
        self.cache.clear();
        deleted
    }

    async fn create_session(
        &self,
        token_hash: &str,
        user_id: &str,
        now: f64,
        expires_at: f64,
    ) -> StoreResult<()> {
        self.inner
            .create_session(token_hash, user_id, now, expires_at)
            .await
    }

    async fn session(&self, token_hash: &str, now: f64) -> StoreResult<Option<(User, f64)>> {
        self.inner.session(token_hash, now).await
    }

    async fn session_user(&self, token_hash: &str, now: f64) -> StoreResult<Option<User>> {
        let Some(version) = self.freshness.version().await else {
            return self.inner.session_user(token_hash, now).await;
        };
        self.cache.observe(version);
        if let Some(user) = self.cache.get(token_hash, now) {
            return Ok(Some(user));
        }
        let generation = self.cache.generation.load(Ordering::SeqCst);
        let found = self.inner.session(token_hash, now).await?;
        Ok(found.map(|(user, expires_at)| {
            let entry = Entry {
                user: user.clone(),
                expires_at,
            };
            self.cache.fill(token_hash, entry, generation, version);
            user
        }))
    }

    async fn session_user_fresh(&self, token_hash: &str, now: f64) -> StoreResult<Option<User>> {
        self.inner.session_user(token_hash, now).await
    }

    async fn delete_session(&self, token_hash: &str) -> StoreResult<()> {
        let deleted = self.inner.delete_session(token_hash).await;
        self.cache.evict(token_hash);
        deleted
    }

    async fn admit_leg(&self, user_id: &str) -> StoreResult<Admission> {
        self.inner.admit_leg(user_id).await
    }

    async fn refund_leg(&self, user_id: &str) -> StoreResult<()> {
        self.inner.refund_leg(user_id).await
    }

    async fn roll_quota_month(&self, month: i64) -> StoreResult<u64> {
        let rolled = self.inner.roll_quota_month(month).await;
        // Cached accounts carry last month's `used`.
        self.cache.clear();
        rolled
    }

    async fn unlock_signin(&self, email: &str, now: f64) -> StoreResult<bool> {
        self.inner.unlock_signin(email, now).await
    }

    async fn signin_unlocked_at(&self, email: &str) -> StoreResult<Option<f64>> {
        self.inner.signin_unlocked_at(email).await
    }

    async fn add_to_waitlist(&self, email: &str, source: &str, now: f64) -> StoreResult<()> {
        self.inner.add_to_waitlist(email, source, now).await
    }

    async fn ping(&self) -> StoreResult<()> {
        self.inner.ping().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;

    /// A session of one plain user, kept until `expires_at` (also for the listener's tests).
    pub(super) fn entry(expires_at: f64) -> Entry {
        Entry {
            user: User {
                id: "u_1".into(),
                email: "a@example.com".into(),
                role: Role::User,
                limit: 10,
                used: 0,
                created_at: 0.0,
                allowed_models: None,
            },
            expires_at,
        }
    }

    #[test]
    fn an_expired_session_is_not_served() {
        let cache = SessionCache::new(8);
        cache.observe(1);
        cache.fill(
            "h",
            entry(100.0),
            cache.generation.load(Ordering::SeqCst),
            1,
        );
        assert!(cache.get("h", 99.0).is_some());
        assert!(cache.get("h", 100.0).is_none());
    }

    #[test]
    fn a_lookup_that_raced_an_eviction_or_a_new_version_fills_nothing() {
        let cache = SessionCache::new(8);
        cache.observe(1);
        let before = cache.generation.load(Ordering::SeqCst);
        cache.evict("h");
        cache.fill("h", entry(100.0), before, 1);
        assert!(cache.get("h", 0.0).is_none(), "evicted while reading");

        let before = cache.generation.load(Ordering::SeqCst);
        cache.observe(2);
        cache.fill("h", entry(100.0), before, 1);
        assert!(cache.get("h", 0.0).is_none(), "read under the old version");

        let before = cache.generation.load(Ordering::SeqCst);
        cache.fill("h", entry(100.0), before, 2);
        assert!(cache.get("h", 0.0).is_some());
        cache.observe(3);
        assert!(cache.is_empty(), "a new version drops everything");
    }
}
