//! The SQLite backend: one file, WAL, a busy timeout, migrations embedded and applied at open.
//!
//! This file opens the pool; `accounts`, `notes` and `ranking` hold the queries of each area.
//!
//! Which connection writes notes (the rule a new write follows). SQLite takes one writer at a
//! time whatever the driver, so correctness does not depend on the choice; cost does:
//! - A write that adds notes (remember, the bulk fill) or their vectors (the embeddings worker)
//!   goes through `writer`: rusqlite on a connection of its own, concurrent remembers gathered
//!   into one transaction (group commit). A remember arrives with every agent that saves what it
//!   learned, often many at once; through sqlx each took six hand-offs to the worker thread while
//!   holding the write lock.
//! - A write that changes or removes notes one request at a time (edit, delete a note, a project
//!   or a user's notes, forgetting counters) goes through sqlx's pool, as accounts and sessions
//!   do: rare, one statement or two, and nothing gained by batching.
//! - Either way a note's `notes_fts` row is written in the same transaction as the note, and
//!   the project's write version moves by trigger (migration 0003), so the injection index
//!   (`injection`) sees a write from either connection, or another process, at the next leg.
//!
//! Quota writes (admissions, refunds) have their own path, `batch`, for the same reason as
//! remembers: one per leg. The usage ledger's batches share that path's connection (`ledger`), so
//! that a leg's quota write never sleeps in the busy handler behind one.

mod accounts;
mod batch;
mod checkpoint;
mod ledger;
mod notes;
mod ranking;
mod reservations;
mod signin;
mod usage;
mod vectors;

mod bulk;
mod injection;
mod snapshot;
mod writer;

use std::str::FromStr;
use std::sync::Arc;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{StoreOptions, StoreResult};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("src/store/sqlite/migrations");

pub struct SqliteStore {
    pool: SqlitePool,
    /// Admissions, refunds and open-mode counts: at once when idle, in batches under load.
    writes: batch::QuotaWrites,
    /// Projects' notes in memory for injection, checked against their write version per leg.
    injection: Arc<injection::Injection>,
    /// The connection note writes go through (remember's group commit, bulk fills).
    writer: writer::NoteWriter,
    remembers: writer::RememberBatcher,
    checkpoints: checkpoint::Checkpointer,
    /// Each leg's budget read (its account's month), inline.
    months: reservations::MonthReader,
}

impl SqliteStore {
    /// Opens (creating the file and its directory if needed) and migrates.
    pub async fn open(url: &str, options: &StoreOptions) -> anyhow::Result<Self> {
        let connect = SqliteConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("cannot parse SQLite URL: {e}"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // NORMAL in WAL mode loses nothing on a process crash (kill -9); only a power cut can
            // drop the last transactions, which a laptop or single-box deployment accepts.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(options.busy_timeout)
            // Checkpoints run in the background (see `checkpoint`), never inside a commit.
            .pragma(
                "wal_autocheckpoint",
                checkpoint::COMMIT_CHECKPOINT_PAGES.to_string(),
            )
            .foreign_keys(true);
        let path = connect.get_filename().to_owned();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                anyhow::anyhow!("cannot create the data directory {}: {e}", dir.display())
            })?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.busy_timeout)
            .connect_with(connect)
            .await
            .map_err(|e| anyhow::anyhow!("cannot open SQLite database {}: {e}", path.display()))?;
        MIGRATOR.run(&pool).await.map_err(|e| {
            anyhow::anyhow!("cannot migrate SQLite database {}: {e}", path.display())
        })?;
        let writer = writer::NoteWriter::open(&path, options.busy_timeout)?;
        Ok(Self {
            checkpoints: checkpoint::Checkpointer::start(&path)?,
            writes: batch::leg_writes(&pool, &path, options.busy_timeout)?,
            remembers: writer.remembers(),
            writer,
            pool,
            injection: injection::Injection::new(Some(snapshot::SnapshotReader::open(&path)?)),
            months: reservations::MonthReader::open(&path)?,
        })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Reads the project into the injection index now, as the first leg after a write starts in
    /// the background; for callers that time injection with the index in place.
    pub async fn build_injection_index(&self, user_id: &str, project_id: &str) -> StoreResult<()> {
        self.injection.build(&self.pool, user_id, project_id).await
    }
}

/// A read-only side connection for reads made inline on a leg's thread (the injection snapshot,
/// the budget read): a WAL read never waits for writers, and should it meet a lock it answers at
/// once (no busy timeout), so the caller reads through sqlx instead.
pub(super) fn inline_reader(
    path: &std::path::Path,
    purpose: &str,
) -> anyhow::Result<std::sync::Mutex<rusqlite::Connection>> {
    side_connection(
        path,
        purpose,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        |conn| conn.busy_timeout(std::time::Duration::ZERO),
    )
    .map(std::sync::Mutex::new)
}

/// Opens the (already migrated) database file once more, beside sqlx's pool, for one `purpose`
/// named in errors: the connections Relay drives itself with rusqlite (session and injection
/// checks, budget reads, note writes, quota writes, checkpoints), each set up by `configure`.
pub(crate) fn side_connection(
    path: &std::path::Path,
    purpose: &str,
    flags: rusqlite::OpenFlags,
    configure: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<()>,
) -> anyhow::Result<rusqlite::Connection> {
    rusqlite::Connection::open_with_flags(path, flags)
        .and_then(|conn| configure(&conn).map(|()| conn))
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot open SQLite database {} for {purpose}: {e}",
                path.display()
            )
        })
}
