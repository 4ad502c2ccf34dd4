//! The figures one leg reads before injecting from memory, in one statement: the project's write
//! versions. Read inline on a side connection, or
//! through sqlx when that connection meets a lock.

use sqlx::Row;
use sqlx::sqlite::SqlitePool;
use std::sync::Mutex;

use super::injection::lock;
use crate::store::StoreResult;

/// What one leg reads first, in one statement (one read transaction, so the figures agree).
const SNAPSHOT: &str = "SELECT c.version, c.rewritten
 FROM (SELECT 1) LEFT JOIN note_counters c ON c.user_id = ?1 AND c.project_id = ?2";

/// The snapshot read inline on a connection of its own, as the session check reads
/// `auth_version` (`store::auth_cache::sqlite`): through sqlx it was a hand-off to the worker
/// thread and back on every leg. A WAL read never waits for writers; should it meet a lock, it
/// answers at once (no busy timeout) and the leg reads through sqlx instead.
pub struct SnapshotReader {
    conn: Mutex<rusqlite::Connection>,
}

impl SnapshotReader {
    pub fn open(path: &std::path::Path) -> anyhow::Result<Self> {
        Ok(Self {
            conn: super::inline_reader(path, "injection checks")?,
        })
    }

    pub(super) fn read(&self, user_id: &str, project_id: &str) -> rusqlite::Result<Snapshot> {
        let conn = lock(&self.conn);
        conn.prepare_cached(SNAPSHOT)?
            .query_row([user_id, project_id], |row| {
                let version: Option<i64> = row.get(0)?;
                let rewritten: Option<i64> = row.get(1)?;
                Ok(Snapshot {
                    version: version.zip(rewritten),
                })
            })
    }
}

/// What one leg reads first.
pub(super) struct Snapshot {
    /// The project's write version and the version of its last edit or delete; `None` without
    /// a counter row.
    pub(super) version: Option<(i64, i64)>,
}

pub(super) async fn snapshot(
    pool: &SqlitePool,
    user_id: &str,
    project_id: &str,
) -> StoreResult<Snapshot> {
    let row = sqlx::query(SNAPSHOT)
        .bind(user_id)
        .bind(project_id)
        .fetch_one(pool)
        .await?;
    let version: Option<i64> = row.try_get("version")?;
    let rewritten: Option<i64> = row.try_get("rewritten")?;
    Ok(Snapshot {
        version: version.zip(rewritten),
    })
}
