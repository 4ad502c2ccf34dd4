//! The PostgreSQL backend: one database shared by any number of Relay instances.
//!
//! Every rule that must hold across instances is enforced by PostgreSQL itself, never by process
//! memory: quota admission is one conditional `UPDATE`; note ids come from a counter row whose lock
//! serialises writers of a project; sessions are cached per instance, and a cached one is served
//! only once a listener has heard every change committed before the request (`store::auth_cache`);
//! migrations run under the advisory lock sqlx's PostgreSQL migrator takes (`pg_advisory_lock` in
//! `sqlx-postgres/src/migrate.rs`, `Migrate::lock`), so instances that start together migrate once.
//! This file opens the pool and reads PostgreSQL's error codes; `accounts`, `notes` and `ranking`
//! hold the queries of each area.

mod accounts;
mod batch;
pub mod held;
mod injection;
mod ledger;
mod notes;
mod ranking;
mod reservations;
mod signin;
mod usage;
mod vectors;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::{StoreError, StoreOptions};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("src/store/postgres/migrations");

pub struct PgStore {
    pool: PgPool,
    /// Connections apart from the pool for the per-leg statements.
    held: Arc<held::Held>,
    /// Admissions, refunds and open-mode counts, sent in batches (group commit).
    writes: super::batch::LegWrites,
    /// Each project's notes in memory for injection, per project write version.
    injected: Arc<injection::InjectionCache>,
}

impl PgStore {
    /// Connects and migrates. A server that cannot be reached yet (down, starting, unreachable)
    /// does not stop start-up: the pool connects lazily, the store answers `Unavailable` (503)
    /// until the server is up, and the first connection made then migrates before any query runs,
    /// so the instance serves by itself without a restart. A server that answers but refuses
    /// (wrong password, no such database, a failed migration) still stops start-up.
    pub async fn open(url: &str, options: &StoreOptions) -> anyhow::Result<Self> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("cannot parse PostgreSQL URL: {e}"))?
            .application_name("relay");
        // Named without the user or password: this goes to the log.
        let target = format!(
            "{}:{}/{}",
            connect.get_host(),
            connect.get_port(),
            connect.get_database().unwrap_or_default()
        );
        let migrated = Arc::new(AtomicBool::new(false));
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            // A request waits this long for a connection; past it the store counts as unavailable
            // and the handler answers 503 instead of hanging while the server is down.
            .acquire_timeout(options.busy_timeout)
            // Connections the server dropped (a restart, a failover) are found and replaced before
            // a request gets them, so service resumes by itself when the server is back. (The
            // per-leg statements skip this test and its round trip: `held`.)
            .test_before_acquire(true)
            .after_connect({
                let migrated = migrated.clone();
                move |conn, _meta| {
                    let migrated = migrated.clone();
                    Box::pin(async move {
                        if !migrated.load(Ordering::Acquire) {
                            // Under the migrator's advisory lock: concurrent first connections
                            // (and other instances) apply each migration once. `run_direct` is
                            // what `run` calls; `run` itself cannot take the callback's borrowed
                            // connection ("Acquire is not general enough").
                            MIGRATOR
                                .run_direct(None, conn, false)
                                .await
                                .map_err(|e| match e {
                                    sqlx::migrate::MigrateError::Execute(inner) => inner,
                                    other => sqlx::Error::Migrate(Box::new(other)),
                                })?;
                            migrated.store(true, Ordering::Release);
                        }
                        Ok(())
                    })
                }
            })
            .connect_lazy_with(connect);
        match pool.acquire().await {
            Ok(_) => {}
            // Said plainly: a refused certificate is a configuration problem, not an outage, so it
            // stops start-up. sqlx reports a handshake the verifier refused as an I/O error
            // carrying rustls' text.
            Err(e) if matches!(e, sqlx::Error::Tls(_)) || e.to_string().contains("certificate") => {
                anyhow::bail!(
                    "cannot connect to PostgreSQL at {target}: TLS failed ({e}); check sslmode and sslrootcert in the URL"
                )
            }
            Err(e) => match StoreError::from(e) {
                StoreError::Unavailable(why) => tracing::warn!(
                    store = %target,
                    error = %why,
                    "PostgreSQL is unreachable; starting anyway: its endpoints answer 503 until it is up, then it is migrated and used without a restart"
                ),
                other => anyhow::bail!("cannot open PostgreSQL database {target}: {other}"),
            },
        }
        let held = Arc::new(held::Held::new(&pool));
        Ok(Self {
            writes: batch::leg_writes(&held),
            injected: Arc::new(injection::InjectionCache::new(&held)),
            held,
            pool,
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The connections the per-leg statements run on, for the session cache's version reads.
    pub fn held(&self) -> &Arc<held::Held> {
        &self.held
    }
}

/// The store error a PostgreSQL error stands for, by its SQLSTATE; `None` for another database's
/// error. `message` is the error's text.
///
/// Only the server going away or running out of room is worth a retry; anything else (a syntax
/// error, a broken constraint) is a bug and must not hide behind a 503.
pub(super) fn classify(db: &dyn sqlx::error::DatabaseError, message: String) -> Option<StoreError> {
    db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?;
    let code = db.code().unwrap_or_default();
    // 22021: a byte sequence invalid in the encoding (a NUL character in text);
    // 22P05: a character the encoding cannot represent.
    if code == "22021" || code == "22P05" {
        return Some(StoreError::Unstorable(message));
    }
    let retryable = code.starts_with("08") // connection exception
        || code.starts_with("53") // insufficient resources: too many connections, disk full
        || code.starts_with("57P") // admin/crash shutdown, cannot connect now
        || code.starts_with("58") // system error (I/O)
        || code == "57014" // query cancelled (statement timeout)
        || code == "40001" // serialization failure
        || code == "40P01" // deadlock detected
        || code == "55P03" // lock not available
        || code == "25006"; // read-only transaction: a standby after failover
    Some(if retryable {
        StoreError::Unavailable(message)
    } else {
        StoreError::Internal(message)
    })
}
