//! PostgreSQL's `Freshness`: a task that `LISTEN`s on `relay_auth` (notified by the triggers of
//! migration 0017 in the transaction that makes the change) and evicts what each notification names.
//!
//! The cache is trusted only while the listener is connected and listening: a notification sent
//! while it is not is lost, so on a lost connection the cache is dropped and bypassed until the
//! listener is back, and the reconnection starts a new version, which drops whatever was read
//! under the old one. The listener has a one-connection pool of its own, so it takes no connection
//! from the requests' pool.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{Freshness, SessionCache};

/// The channel the triggers notify.
pub const CHANNEL: &str = "relay_auth";

/// Waits between attempts to reconnect the listener grow from the first to the last.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

#[derive(Default)]
struct ListenState {
    listening: AtomicBool,
    /// Moved on every (re)connection.
    epoch: AtomicU64,
}

pub struct PgListened {
    state: Arc<ListenState>,
    /// Stops the listener when the store goes.
    _stop: DropGuard,
}

impl PgListened {
    /// Starts the listener for the database `url` names; the cache is bypassed until it listens.
    pub fn start(url: &str, cache: Arc<SessionCache>) -> anyhow::Result<Self> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("cannot parse PostgreSQL URL: {e}"))?
            .application_name("relay-listen");
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .max_lifetime(None)
            .idle_timeout(None)
            .acquire_timeout(RETRY_MAX)
            .connect_lazy_with(options);
        let state = Arc::new(ListenState::default());
        let stop = CancellationToken::new();
        tokio::spawn(listen(pool, state.clone(), cache, stop.clone()));
        Ok(Self {
            state,
            _stop: stop.drop_guard(),
        })
    }
}

impl Freshness for PgListened {
    fn version(&self) -> Option<u64> {
        self.state
            .listening
            .load(Ordering::SeqCst)
            .then(|| self.state.epoch.load(Ordering::SeqCst))
    }
}

/// What one notification's payload evicts.
fn apply(cache: &SessionCache, payload: &str) {
    match payload.strip_prefix("s:") {
        Some(token_hash) => cache.evict(token_hash),
        // An account changed (or something unknown): its sessions cannot be picked out by token.
        None => cache.clear(),
    }
}

async fn connect(pool: &sqlx::PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // A lost connection must surface as `Ok(None)` before anything reconnects, so the cache is
    // distrusted for the whole gap.
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// Marks the listener gone however its task ends, even when its runtime is dropped under it.
struct Listening(Arc<ListenState>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.listening.store(false, Ordering::SeqCst);
    }
}

async fn listen(
    pool: sqlx::PgPool,
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
            Ok(mut listener) => {
                state.epoch.fetch_add(1, Ordering::SeqCst);
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
                        Ok(Some(n)) => apply(&cache, n.payload()),
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
