//! WAL checkpoints in the background, so that requests seldom wait for one.
//!
//! SQLite's default moves the write-ahead log back into the database file from inside a commit
//! once the log passes 1,000 pages: that commit copies the pages and syncs the file, and every
//! request queued behind it waits. Under remember load this was the whole p99 (about 22 ms, one
//! commit in a few hundred). Here a task runs a PASSIVE checkpoint on a connection of its own once
//! a second (every 100 ms cost about 0.1 ms of CPU per leg more: a hot page is copied once per
//! checkpoint); PASSIVE never blocks readers or writers, and the log starts over at the next write
//! after a checkpoint has caught up. Under sustained writes it never catches up (new frames land
//! while it copies), so commits keep a checkpoint of their own at `COMMIT_CHECKPOINT_PAGES`, ten
//! times SQLite's default: without it the log grew to 442 MB in 5 s of remembers and the next
//! start took 283 ms to read it back. `journal_size_limit` trims the file after a restart.
//! At a clean shutdown the log is moved into the file and emptied (`empty_the_log`): a start that
//! finds a long log must read all of it back before the first request (`bench/run.sh` measured
//! 114 ms to ready on a database left with the log of its remember stage, 45 ms with an empty one).

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::{CancellationToken, DropGuard};

/// How often the log is checkpointed.
const EVERY: Duration = Duration::from_secs(1);

/// A commit still checkpoints once the log passes this many pages (SQLite's default is 1,000): the
/// safety net for sustained writes, under which a PASSIVE checkpoint never catches up with the
/// writers, so the log could never start over and would grow without end.
pub const COMMIT_CHECKPOINT_PAGES: i64 = 10_000;

/// The log file is truncated back to this size after a checkpoint that caught up.
pub const JOURNAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// How long the shutdown checkpoint waits for writes and reads under way to finish. Short: while
/// it waits it holds the write lock, so another process serving the same file (several instances
/// on one SQLite file) has its writes wait as long; a statement here takes milliseconds.
const AT_EXIT_WAIT: Duration = Duration::from_millis(250);

/// Stops the task when the store goes.
pub struct Checkpointer {
    conn: Arc<Mutex<rusqlite::Connection>>,
    _stop: DropGuard,
}

impl Checkpointer {
    /// Opens a connection to the (already migrated) file and starts checkpointing.
    pub fn start(path: &Path) -> anyhow::Result<Self> {
        let conn = super::side_connection(
            path,
            "checkpoints",
            rusqlite::OpenFlags::default(),
            |conn| {
                conn.busy_timeout(Duration::ZERO)?;
                conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT)
            },
        )?;
        let conn = Arc::new(Mutex::new(conn));
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task_conn = conn.clone();
        tokio::spawn(async move {
            let conn = task_conn;
            let mut tick = tokio::time::interval(EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing = false;
            loop {
                tokio::select! {
                    () = stopped.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let conn = conn.clone();
                let done = tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
                    checkpoint(&conn)
                })
                .await;
                match done {
                    Ok(Ok(())) => failing = false,
                    Ok(Err(e)) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "WAL checkpoint failed; retrying");
                    }
                    Ok(Err(_)) => {}
                    // The runtime is going away.
                    Err(_) => return,
                }
            }
        });
        Ok(Self {
            conn,
            _stop: stop.drop_guard(),
        })
    }

    /// Copies the whole log into the database file and truncates the log to nothing (a TRUNCATE
    /// checkpoint), waiting up to `AT_EXIT_WAIT` for what is under way. For the moment before the
    /// process exits; on failure the next start reads the log back, as after a crash.
    pub async fn empty_the_log(&self) {
        let conn = self.conn.clone();
        let done = tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            conn.busy_timeout(AT_EXIT_WAIT)?;
            // (busy, log frames, frames checkpointed): busy is 1 when a reader or writer held on.
            let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
            conn.busy_timeout(Duration::ZERO)?;
            Ok::<_, rusqlite::Error>(busy == 0)
        })
        .await;
        match done {
            Ok(Ok(true)) => tracing::debug!("SQLite log moved into the database file"),
            Ok(Ok(false)) => {
                tracing::warn!("SQLite log not emptied at shutdown: the database was busy")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "SQLite log not emptied at shutdown"),
            Err(_) => {}
        }
    }
}

fn checkpoint(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use crate::domain::{Author, MemType, NoteText, ProjectId};
    use crate::store::sqlite::SqliteStore;
    use crate::store::{NewNote, StoreOptions};

    /// The notes in the database file alone, as a copy without its log sees them.
    fn notes_in_the_file(db: &std::path::Path, scratch: &std::path::Path) -> i64 {
        let copy = scratch.join("copy.db");
        std::fs::copy(db, &copy).unwrap();
        let conn = rusqlite::Connection::open(&copy).unwrap();
        let n = conn
            .query_row("SELECT count(*) FROM notes", [], |r| r.get(0))
            .unwrap_or(-1);
        drop(conn);
        let _ = std::fs::remove_file(&copy);
        n
    }

    /// A store at `db` with `n` notes of user u1 in project p, written in one bulk insert.
    async fn store_with_notes(db: &std::path::Path, n: usize) -> SqliteStore {
        let options = StoreOptions {
            max_connections: 4,
            busy_timeout: std::time::Duration::from_secs(5),
        };
        let store = SqliteStore::open(&format!("sqlite://{}", db.display()), &options)
            .await
            .unwrap();
        let notes: Vec<NewNote> = (0..n)
            .map(|i| NewNote {
                user_id: "u1".into(),
                project_id: ProjectId::parse("p").unwrap(),
                text: NoteText::parse(&format!("note number {i}"), "note").unwrap(),
                author: Author::default(),
                mem_type: MemType::default(),
                created_at: 1.0,
            })
            .collect();
        store.insert_notes_bulk(&notes).await.unwrap();
        store
    }

    #[tokio::test]
    async fn committed_notes_reach_the_database_file_without_a_commit_checkpointing() {
        let dir = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let db = dir.path().join("relay.db");
        let store = store_with_notes(&db, 2_000).await;
        // The insert is far below the commits' own checkpoint threshold: only the background task
        // moves the notes from the log into the file, within about a second.
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let mut seen = notes_in_the_file(&db, scratch.path());
        while seen != 2_000 && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            seen = notes_in_the_file(&db, scratch.path());
        }
        assert_eq!(seen, 2_000, "the log was not checkpointed into the file");
        let wal = std::fs::metadata(dir.path().join("relay.db-wal")).map_or(0, |m| m.len());
        assert!(
            wal <= super::JOURNAL_SIZE_LIMIT as u64,
            "the log kept {wal} bytes"
        );
        drop(store);
    }

    #[tokio::test]
    async fn closing_the_store_moves_the_log_into_the_file_and_empties_it() {
        let dir = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let db = dir.path().join("relay.db");
        let store = store_with_notes(&db, 500).await;
        let wal = dir.path().join("relay.db-wal");
        let log_len = || std::fs::metadata(&wal).map_or(0, |m| m.len());
        assert!(log_len() > 0, "the insert wrote no log");
        crate::store::MemoryStore::close(&store).await;
        // A background (PASSIVE) checkpoint copies the log but leaves the file its size, which the
        // next start reads back; only the shutdown checkpoint empties it.
        assert_eq!(log_len(), 0, "the log was not emptied");
        assert_eq!(notes_in_the_file(&db, scratch.path()), 500);
        // The store still works after it (a request that raced the shutdown is not refused).
        assert_eq!(
            crate::store::MemoryStore::recall(&store, "u1", "p", 3)
                .await
                .unwrap()
                .len(),
            3
        );
    }
}
