//! SQLite's `Freshness`: the `auth_version` row (migration 0017), which triggers move on every
//! change a cached session depends on, read per request on a connection of its own.
//!
//! The read goes through rusqlite on the calling thread rather than through sqlx: sqlx runs every
//! SQLite statement on a worker thread and hands the result back, and that hand-off, not the
//! statement, is what a session lookup cost (see docs/DEPENDENCIES.md). A one-row primary-key read
//! with a prepared statement in WAL mode takes microseconds and never waits on writers, so it runs
//! inline; a busy or broken file makes it answer `None` at once, and the lookup goes to the store.

use std::path::Path;
use std::sync::Mutex;

use super::Freshness;

const READ_VERSION: &str = "SELECT version FROM auth_version WHERE id = 1";

pub struct SqliteVersion {
    conn: Mutex<rusqlite::Connection>,
}

impl SqliteVersion {
    /// Opens the (already migrated) database file a second time, for this read only.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        // Never wait: a lookup that cannot read the version now goes to the store instead.
        let conn = crate::store::sqlite::side_connection(
            path,
            "session checks",
            rusqlite::OpenFlags::default(),
            |conn| conn.busy_timeout(std::time::Duration::ZERO),
        )?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn read(&self) -> rusqlite::Result<i64> {
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        conn.prepare_cached(READ_VERSION)?
            .query_row([], |row| row.get(0))
    }
}

#[async_trait::async_trait]
impl Freshness for SqliteVersion {
    async fn version(&self) -> Option<u64> {
        match self.read() {
            Ok(v) => Some(v.unsigned_abs()),
            Err(e) => {
                tracing::debug!(error = %e, "session cache bypassed: cannot read auth_version");
                None
            }
        }
    }
}
