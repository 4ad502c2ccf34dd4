//! PostgreSQL's `Freshness`: a task that `LISTEN`s on `relay_auth` (notified by the triggers of
//! migrations 0017 and 0019 in the transaction that makes the change) and evicts what each
//! notification names, and a per-request read of the `auth_version` row those triggers move.
//!
//! A notification arrives some time after its change commits, so hearing them is not enough for a
//! change to hold at the very next request on another instance. Each one carries the version its
//! transaction gave the row, and the listener records the highest it has applied; a request reads
//! the row (batched with concurrent requests' reads, `store::batch`) and uses the cache only when
//! the listener has applied that version, which every change committed before the request began is
//! at most. Otherwise the lookup goes to the store. The cache is trusted only while the listener is
//! connected and listening: a notification sent while it is not is lost, so on a lost connection
//! the cache is dropped and bypassed until the listener is back, and the reconnection starts a new
//! epoch, which drops whatever was read under the old one. The listener has a one-connection pool
//! of its own, so it takes no connection from the requests' pool.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{Freshness, SessionCache};
use crate::store::StoreResult;
use crate::store::batch::Batcher;
use crate::store::postgres::held::Held;

/// The channel the triggers notify.
pub const CHANNEL: &str = "relay_auth";

const READ_VERSION: &str = "SELECT version FROM auth_version WHERE id = 1";

/// Waits between attempts to reconnect the listener grow from the first to the last.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

#[derive(Default)]
struct ListenState {
    listening: AtomicBool,
    /// Moved on every (re)connection.
    epoch: AtomicU64,
    /// The highest `auth_version` whose change this process has evicted (or whose changes were all
    /// committed before the listener's connection began listening and the cache was dropped).
    applied: AtomicI64,
}

pub struct PgListened {
    state: Arc<ListenState>,
    /// Reads `auth_version`; concurrent requests share one read.
    versions: Batcher<(), i64>,
    /// Stops the listener when the store goes.
    _stop: DropGuard,
}

impl PgListened {
    /// Starts the listener for the database `url` names; the cache is bypassed until it listens.
    /// `held` are the store's connections for per-leg statements, for the per-request version read.
    pub fn start(url: &str, held: &Arc<Held>, cache: Arc<SessionCache>) -> anyhow::Result<Self> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("cannot parse PostgreSQL URL: {e}"))?
            .application_name("relay-listen");
        let listen_pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .max_lifetime(None)
            .idle_timeout(None)
            .acquire_timeout(RETRY_MAX)
            .connect_lazy_with(options);
        let state = Arc::new(ListenState::default());
        let stop = CancellationToken::new();
        tokio::spawn(listen(listen_pool, state.clone(), cache, stop.clone()));
        let held = held.clone();
        Ok(Self {
            state,
            versions: Batcher::spawn_direct(move |asks: Vec<()>| {
                let held = held.clone();
                async move { read_version(&held, asks.len()).await }
            }),
            _stop: stop.drop_guard(),
        })
    }
}

/// One read of the version row, answered to each of `asks` callers.
async fn read_version(held: &Held, asks: usize) -> StoreResult<Vec<i64>> {
    let version: i64 = held
        .run(|conn| sqlx::query_scalar(READ_VERSION).fetch_one(conn).boxed())
        .await?;
    Ok(vec![version; asks])
}

#[async_trait]
impl Freshness for PgListened {
    async fn version(&self) -> Option<u64> {
        let epoch = self.state.epoch.load(Ordering::SeqCst);
        if !self.state.listening.load(Ordering::SeqCst) {
            return None;
        }
        let committed = match self.versions.submit(()).await {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(error = %e, "session cache bypassed: cannot read auth_version");
                return None;
            }
        };
        let caught_up = self.state.applied.load(Ordering::SeqCst) >= committed;
        let same_connection = self.state.listening.load(Ordering::SeqCst)
            && self.state.epoch.load(Ordering::SeqCst) == epoch;
        (caught_up && same_connection).then_some(epoch)
    }
}

/// What one notification's payload evicts, then marks its version applied.
fn apply(cache: &SessionCache, applied: &AtomicI64, payload: &str) {
    let parsed = payload
        .split_once(' ')
        .and_then(|(v, what)| Some((v.parse::<i64>().ok()?, what)));
    let Some((version, what)) = parsed else {
        // Not this version's format: drop everything, and leave `applied` where it is.
        cache.clear();
        return;
    };
    match what.strip_prefix("s:") {
        Some(token_hash) => cache.evict(token_hash),
        // An account changed (or something unknown): its sessions cannot be picked out by token.
        None => cache.clear(),
    }
    applied.fetch_max(version, Ordering::SeqCst);
}

/// Connects, listens, and reads the version every change before the listening began is within.
async fn connect(pool: &PgPool) -> Result<(PgListener, i64), sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // A lost connection must surface as `Ok(None)` before anything reconnects, so the cache is
    // distrusted for the whole gap.
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    let version = sqlx::query_scalar(READ_VERSION)
        .fetch_one(&mut listener)
        .await?;
    Ok((listener, version))
}

/// Marks the listener gone however its task ends, even when its runtime is dropped under it.
struct Listening(Arc<ListenState>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.listening.store(false, Ordering::SeqCst);
    }
}

async fn listen(
    pool: PgPool,
    state: Arc<ListenState>,
    cache: Arc<SessionCache>,
    stop: CancellationToken,
) {
    let _gone = Listening(state.clone());
    let mut wait = RETRY_FIRST;
    let mut failing = false;
    loop {
        let connected = tokio::select! {
            () = stop.cancelled() => return,
            c = connect(&pool) => c,
        };
        match connected {
            Ok((mut listener, version)) => {
                // Whatever was cached may predate a change this listener never heard: a new epoch
                // drops it; changes up to `version` are thereby applied.
                cache.clear();
                state.epoch.fetch_add(1, Ordering::SeqCst);
                state.applied.fetch_max(version, Ordering::SeqCst);
                state.listening.store(true, Ordering::SeqCst);
                if failing {
                    tracing::info!("session cache listener reconnected; the cache is used again");
                }
                wait = RETRY_FIRST;
                let why = loop {
                    let next = tokio::select! {
                        () = stop.cancelled() => return,
                        n = listener.try_recv() => n,
                    };
                    match next {
                        Ok(Some(n)) => apply(&cache, &state.applied, n.payload()),
                        Ok(None) => break "connection lost".to_owned(),
                        Err(e) => break e.to_string(),
                    }
                };
                state.listening.store(false, Ordering::SeqCst);
                cache.clear();
                tracing::warn!(error = %why, "session cache listener disconnected; sessions are read from PostgreSQL until it is back");
                failing = true;
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "session cache listener cannot listen; sessions are read from PostgreSQL until it can");
                }
                failing = true;
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(RETRY_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(cache: &SessionCache, token_hash: &str) {
        let entry = super::super::tests::entry(100.0);
        let generation = cache.generation.load(Ordering::SeqCst);
        cache.fill(token_hash, entry, generation, 1);
    }

    #[test]
    fn a_payload_evicts_what_it_names_then_counts_as_applied() {
        let cache = SessionCache::new(8);
        cache.observe(1);
        cached(&cache, "abc");
        cached(&cache, "def");
        let applied = AtomicI64::new(3);
        apply(&cache, &applied, "7 s:abc");
        assert_eq!(applied.load(Ordering::SeqCst), 7);
        assert!(cache.get("abc", 0.0).is_none(), "the named session goes");
        assert!(cache.get("def", 0.0).is_some(), "the others stay");

        apply(&cache, &applied, "5 u:u_1");
        assert_eq!(applied.load(Ordering::SeqCst), 7, "never moves back");
        assert!(cache.is_empty(), "an account change drops every session");

        cached(&cache, "def");
        apply(&cache, &applied, "s:def");
        assert_eq!(
            applied.load(Ordering::SeqCst),
            7,
            "an unversioned payload applies nothing"
        );
        assert!(cache.is_empty(), "and drops everything");
    }
}
