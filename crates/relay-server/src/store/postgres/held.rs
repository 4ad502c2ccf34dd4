//! Connections held apart from the pool's queue for the per-leg statements that `store::batch`
//! sends (admissions, refunds, open-mode counts, the version reads of sessions and injection).
//!
//! sqlx's pool pings a connection when it is handed out (`test_before_acquire`) and again, on a
//! task of its own, when it comes back (`Floating::return_to_pool` in sqlx-core 0.9): a statement
//! through the pool is three round trips, and the two pings woke Relay's runtime and a PostgreSQL
//! backend as often as the statement itself. These statements run one batch at a time per kind, so
//! a few connections serve them all: each is acquired from the pool once (so `max_connections`
//! still bounds every connection of the store) and kept here between statements instead of going
//! back. One whose statement failed or was dropped half-way (its caller went away) is closed, never
//! reused; one idle for `PING_AFTER` or more is pinged first, so a connection that a PostgreSQL
//! restart ended is found before a leg's statement is sent on it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sqlx::Connection;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgPool, Postgres};

use crate::store::StoreResult;

/// A connection idle this long is pinged before use. Under load they are never idle this long;
/// a restart of PostgreSQL takes longer.
const PING_AFTER: Duration = Duration::from_secs(1);

/// The held connections of one store.
pub struct Held {
    pool: PgPool,
    /// Idle connections kept at most; the pool's other users need the rest, so this is half its
    /// size. Any more that come back (batches of several kinds overlapping) go back to the pool.
    keep: usize,
    /// `PING_AFTER`, but for tests.
    ping_after: Duration,
    idle: Mutex<Vec<(PoolConnection<Postgres>, Instant)>>,
}

/// A connection on loan for one statement; closed when dropped unless `give_back` ran.
struct Lease<'a> {
    held: &'a Held,
    conn: Option<PoolConnection<Postgres>>,
}

impl Held {
    /// Holds at most half of `pool`'s `max_connections`, and none when it has only one.
    pub fn new(pool: &PgPool) -> Self {
        let max_connections = pool.options().get_max_connections();
        Self {
            pool: pool.clone(),
            keep: usize::try_from(max_connections / 2).unwrap_or(usize::MAX),
            ping_after: PING_AFTER,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs one statement on a held connection.
    ///
    /// A connection the server ended while it idled here (a restart's fast shutdown,
    /// `pg_terminate_backend`) holds the server's parting error, `57P01`–`57P03`, which is then
    /// the answer to the next statement sent on it: that statement never ran. It runs once more,
    /// on a connection from the pool (which tests it first); the other idle ones are closed, as
    /// whatever ended one most likely ended them all.
    pub async fn run<T, F>(&self, statement: F) -> StoreResult<T>
    where
        F: for<'c> Fn(&'c mut PgConnection) -> BoxFuture<'c, Result<T, sqlx::Error>>,
    {
        let (mut lease, reused) = self.take().await?;
        match statement(lease.conn()?).await {
            Ok(answer) => {
                lease.give_back();
                Ok(answer)
            }
            Err(e) if reused && ended_by_server(&e) => {
                drop(lease);
                self.close_idle();
                let mut lease = self.lease(self.pool.acquire().await?);
                let answer = statement(lease.conn()?).await?;
                lease.give_back();
                Ok(answer)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The most recently used idle connection (pinged if it idled long) and `true`, else a new
    /// one from the pool and `false`.
    async fn take(&self) -> StoreResult<(Lease<'_>, bool)> {
        while let Some((mut conn, since)) = self.pop() {
            if since.elapsed() < self.ping_after || conn.ping().await.is_ok() {
                return Ok((self.lease(conn), true));
            }
            // Gone (a restart, a dropped connection): the next one, or a new one.
        }
        Ok((self.lease(self.pool.acquire().await?), false))
    }

    fn lease(&self, conn: PoolConnection<Postgres>) -> Lease<'_> {
        Lease {
            held: self,
            conn: Some(conn),
        }
    }

    fn pop(&self) -> Option<(PoolConnection<Postgres>, Instant)> {
        self.idle.lock().ok()?.pop()
    }

    fn close_idle(&self) {
        let idle = self
            .idle
            .lock()
            .map(|mut idle| std::mem::take(&mut *idle))
            .unwrap_or_default();
        for (mut conn, _) in idle {
            conn.close_on_drop();
        }
    }

    /// How many connections wait idle (for tests).
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.lock().map_or(0, |idle| idle.len())
    }
}

/// The server's own "this connection is over" (class 57P: admin or crash shutdown, cannot
/// connect now), sent before it closed the connection.
fn ended_by_server(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code.starts_with("57P"))
}

impl Lease<'_> {
    /// The connection, to run one statement on.
    fn conn(&mut self) -> StoreResult<&mut PgConnection> {
        self.conn.as_deref_mut().ok_or_else(|| {
            crate::store::StoreError::Internal("a lease used after its return".into())
        })
    }

    /// The statement finished: the connection may serve the next one.
    fn give_back(mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if let Ok(mut idle) = self.held.idle.lock()
            && idle.len() < self.held.keep
        {
            idle.push((conn, Instant::now()));
        }
        // Otherwise dropped here: back to the pool, healthy.
    }
}

impl Drop for Lease<'_> {
    /// Not given back: its statement failed or was dropped half-way, so the connection may be
    /// broken or mid-reply, and it is closed rather than returned.
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            conn.close_on_drop();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use futures::FutureExt;

    use super::*;

    /// The test server's maintenance database, as the integration tests find it
    /// (`tests/support/pg.rs`): only `pg_backend_pid()` is asked of it.
    fn held_on_test_server() -> Held {
        let url = std::env::var("RELAY_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect_lazy(&url)
            .unwrap();
        Held::new(&pool)
    }

    /// Ends the backend `pid` and waits until it is gone.
    async fn terminate(held: &Held, pid: i32) {
        let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 5000)")
            .bind(pid)
            .fetch_one(&held.pool)
            .await
            .unwrap();
        assert!(ended);
    }

    async fn backend_pid(held: &Held) -> StoreResult<i32> {
        held.run(|conn| {
            sqlx::query_scalar("SELECT pg_backend_pid()")
                .fetch_one(conn)
                .boxed()
        })
        .await
    }

    #[tokio::test]
    async fn a_connection_serves_again_until_a_statement_on_it_fails() {
        let held = held_on_test_server();
        let pid = backend_pid(&held).await.unwrap();
        assert_eq!(held.idle_count(), 1);
        assert_eq!(
            backend_pid(&held).await.unwrap(),
            pid,
            "the same backend serves again"
        );

        let failed = held
            .run(|conn| sqlx::query("SELECT 1/0").execute(conn).boxed())
            .await;
        assert!(failed.is_err());
        assert_eq!(
            held.idle_count(),
            0,
            "a connection whose statement failed is not kept"
        );
        assert_ne!(
            backend_pid(&held).await.unwrap(),
            pid,
            "a new connection replaces it"
        );
    }

    #[tokio::test]
    async fn a_connection_ended_long_ago_is_found_by_a_ping_before_use() {
        let mut held = held_on_test_server();
        // Every idle connection counts as idle long enough to be pinged.
        held.ping_after = Duration::ZERO;
        let pid = backend_pid(&held).await.unwrap();
        terminate(&held, pid).await;
        assert_ne!(backend_pid(&held).await.unwrap(), pid);
    }

    #[tokio::test]
    async fn a_statement_sent_to_a_connection_ended_just_now_runs_again_on_a_new_one() {
        let held = held_on_test_server();
        let pid = backend_pid(&held).await.unwrap();
        // Within `PING_AFTER`: no ping, the statement itself meets the server's parting error.
        terminate(&held, pid).await;
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let answer = held
            .run(|conn| {
                tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                sqlx::query_scalar::<_, i32>("SELECT pg_backend_pid()")
                    .fetch_one(conn)
                    .boxed()
            })
            .await
            .unwrap();
        assert_ne!(answer, pid);
        assert_eq!(
            tries.into_inner(),
            2,
            "refused once by the ended connection, then ran"
        );
    }
}
