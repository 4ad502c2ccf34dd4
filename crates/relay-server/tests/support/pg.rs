//! A fresh PostgreSQL database per test, dropped with its guard.
//!
//! Shared by several test binaries through `#[path = "…/support/pg.rs"] mod pg;`. The server is the
//! machine's own (`postgres://postgres@127.0.0.1:5432/postgres`, trust authentication; `.ci/run`
//! starts it) unless `RELAY_TEST_PG_URL` names another. Each guard owns one `relay_test_<hex>`
//! database, so tests never see each other's rows and leave nothing behind.

#![allow(dead_code, reason = "each test binary uses a different part")]

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::Connection;

/// Where databases are created: the maintenance database of the test server.
pub fn admin_url() -> String {
    std::env::var("RELAY_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// `url` with its database name replaced by `name`; the query string is kept.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let server = match base[authority_start..].find('/') {
        Some(i) => &base[..authority_start + i],
        None => base,
    };
    match query {
        Some(q) => format!("{server}/{name}?{q}"),
        None => format!("{server}/{name}"),
    }
}

/// A name no other test (in this process or another) picks.
fn fresh_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    format!("relay_test_{:016x}", h.finish())
}

/// One database on the test server; dropped (even while other sessions are still connected to
/// it) when the guard goes.
pub struct TestDb {
    pub url: String,
    pub name: String,
    admin: String,
}

impl TestDb {
    /// Creates a database on the test server named by `RELAY_TEST_PG_URL` or the default.
    pub async fn create() -> Self {
        Self::create_on(&admin_url()).await
    }

    /// Creates a database on the server `admin` (a URL of any database there that may create more).
    pub async fn create_on(admin: &str) -> Self {
        let name = fresh_name();
        let mut conn = sqlx::PgConnection::connect(admin)
            .await
            .unwrap_or_else(|e| {
                panic!("cannot reach the test PostgreSQL at {admin} (is it running? .ci/run starts it): {e}")
            });
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
        let _ = conn.close().await;
        Self {
            url: with_database(admin, &name),
            name,
            admin: admin.to_owned(),
        }
    }

    /// `create` for code that is not async (a configuration builder): runs on a thread of its own
    /// so it works inside and outside a runtime.
    pub fn create_blocking() -> Self {
        std::thread::spawn(|| runtime().block_on(Self::create()))
            .join()
            .unwrap()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let name = self.name.clone();
        // Its own thread and runtime: a guard may drop inside or outside an async test. FORCE ends
        // the sessions a still-running app keeps open.
        let dropped = std::thread::spawn(move || {
            runtime().block_on(async move {
                let mut conn = sqlx::PgConnection::connect(&admin).await?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut conn)
                .await?;
                conn.close().await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}
