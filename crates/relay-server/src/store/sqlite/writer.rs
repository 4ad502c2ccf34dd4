//! Note writes on a connection of their own: remembers of concurrent requests gathered into one
//! transaction (group commit), the notes' vectors (issue 44), and the bulk fill of large
//! benchmark projects.
//!
//! Through sqlx a remember was six hand-offs to a worker thread (begin, look for an equal note,
//! next id, insert, full-text row, commit), each holding SQLite's write lock, so concurrent
//! remembers queued on the busy timeout's back-off sleeps. Here a batch is one hand-off to a
//! blocking thread running rusqlite with prepared statements: one `BEGIN IMMEDIATE`, every note of
//! the batch decided by the same statements as before, one `COMMIT`. A note equal to one earlier
//! in the same batch is found by the later one (a transaction sees its own writes). If the batch
//! fails, each note is tried again alone, so one note that cannot be stored fails only its caller.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior, params};

use super::ranking::scope_token;
use crate::domain::NoteId;
use crate::store::batch::Batcher;
use crate::store::text::{folds_to, norm_hash};
use crate::store::vectors::{Quantised, ToEmbed};
use crate::store::{NewNote, Remembered, StoreError, StoreResult};

/// One remember's own outcome inside a batch.
pub(super) type RememberBatcher = Batcher<NewNote, StoreResult<Remembered>>;

const FIND_EQUAL: &str =
    "SELECT id, note FROM notes WHERE user_id = ?1 AND project_id = ?2 AND norm_hash = ?3";
const NEXT_SEQ: &str =
    "INSERT INTO note_counters (user_id, project_id, last_seq) VALUES (?1, ?2, ?3)
     ON CONFLICT (user_id, project_id) DO UPDATE SET last_seq = last_seq + excluded.last_seq
     RETURNING last_seq";
const INSERT_NOTE: &str = "INSERT INTO notes
     (id, user_id, project_id, seq, note, norm_hash, author, mem_type, created_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING pk";
const INSERT_FTS: &str = "INSERT INTO notes_fts (rowid, note, scope) VALUES (?1, ?2, ?3)";
const DELETE_VECTOR: &str = "DELETE FROM note_vectors WHERE note_id = ?1";
/// Only while the note is there with the text that was embedded.
const INSERT_VECTOR: &str =
    "INSERT INTO note_vectors (note_id, user_id, project_id, model, scale, vec)
     SELECT id, user_id, project_id, ?1, ?2, ?3 FROM notes WHERE id = ?4 AND note = ?5";

/// The write connection, shared by the batch task and bulk fills.
#[derive(Clone)]
pub(super) struct NoteWriter {
    conn: Arc<Mutex<Connection>>,
}

fn unavailable(e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            StoreError::Internal(e.to_string())
        }
        _ => StoreError::Unavailable(e.to_string()),
    }
}

impl NoteWriter {
    /// Opens the (already migrated) database file a second time for note writes.
    pub(super) fn open(path: &Path, busy: Duration) -> anyhow::Result<Self> {
        let conn = super::side_connection(
            path,
            "note writes",
            rusqlite::OpenFlags::default(),
            |conn| {
                conn.busy_timeout(busy)?;
                conn.pragma_update(None, "synchronous", "NORMAL")?;
                conn.pragma_update(None, "foreign_keys", "ON")?;
                conn.pragma_update(
                    None,
                    "wal_autocheckpoint",
                    super::checkpoint::COMMIT_CHECKPOINT_PAGES,
                )
            },
        )?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Starts the batch task that serves `remember`.
    pub(super) fn remembers(&self) -> RememberBatcher {
        let writer = self.clone();
        Batcher::spawn(move |notes: Vec<NewNote>| {
            let writer = writer.clone();
            async move {
                writer
                    .blocking(move |conn| Ok(remember_batch(conn, &notes)))
                    .await
            }
        })
    }

    /// Runs `work` with the connection on a blocking thread.
    async fn blocking<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> StoreResult<R> + Send + 'static,
    ) -> StoreResult<R> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            work(&mut conn)
        })
        .await
        .map_err(|e| StoreError::Internal(format!("the note writer stopped: {e}")))?
    }

    /// Stores a batch of note vectors in one transaction with prepared statements, on this
    /// connection: through sqlx a batch was two hand-offs a note to sqlx's worker while holding
    /// the write lock, and the remembers beside it slept in SQLite's busy handler (remember p99
    /// 15-35 ms with embeddings on, 5 ms off); here a batch waits its turn with the remembers.
    pub(super) async fn put_vectors(
        &self,
        model: String,
        vectors: Vec<(ToEmbed, Quantised)>,
    ) -> StoreResult<()> {
        self.blocking(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            {
                let mut delete = tx.prepare_cached(DELETE_VECTOR).map_err(unavailable)?;
                let mut insert = tx.prepare_cached(INSERT_VECTOR).map_err(unavailable)?;
                for (note, v) in &vectors {
                    delete.execute([note.id.as_str()]).map_err(unavailable)?;
                    insert
                        .execute(params![
                            model,
                            f64::from(v.scale),
                            v.bytes,
                            note.id.as_str(),
                            note.text
                        ])
                        .map_err(unavailable)?;
                }
            }
            tx.commit().map_err(unavailable)
        })
        .await
    }

    /// Stores `notes` (all of one user and project) in one transaction, numbered after the
    /// project's last id, with their full-text rows; unlike `remember` it does not look for equal
    /// notes already there. Returns the ids given.
    pub(super) async fn insert_bulk(&self, notes: Vec<NewNote>) -> StoreResult<Vec<NoteId>> {
        let Some(first) = notes.first() else {
            return Ok(Vec::new());
        };
        let (user, project) = (first.user_id.clone(), first.project_id.clone());
        if notes
            .iter()
            .any(|n| n.user_id != user || n.project_id != project)
        {
            return Err(StoreError::Internal(
                "a bulk insert takes the notes of one project".into(),
            ));
        }
        self.blocking(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            let count = i64::try_from(notes.len()).unwrap_or(i64::MAX);
            let last = next_seq(&tx, &user, project.as_str(), count).map_err(unavailable)?;
            let mut ids = Vec::with_capacity(notes.len());
            for (seq, note) in (last - count + 1..).zip(&notes) {
                ids.push(
                    insert(&tx, note, seq, &norm_hash(&note.text.folded())).map_err(unavailable)?,
                );
            }
            tx.commit().map_err(unavailable)?;
            Ok(ids)
        })
        .await
    }
}

/// One outcome per note: the batch in one transaction, or, when that fails, each note alone.
fn remember_batch(conn: &mut Connection, notes: &[NewNote]) -> Vec<StoreResult<Remembered>> {
    match remember_in_one(conn, notes) {
        Ok(done) => done.into_iter().map(Ok).collect(),
        Err(e) if notes.len() == 1 => vec![Err(unavailable(e))],
        Err(_) => notes
            .iter()
            .map(|note| {
                remember_in_one(conn, std::slice::from_ref(note))
                    .map_err(unavailable)
                    .and_then(|mut one| {
                        one.pop()
                            .ok_or_else(|| StoreError::Internal("a remember wrote nothing".into()))
                    })
            })
            .collect(),
    }
}

/// `notes` remembered in one transaction; nothing is kept if any fails.
fn remember_in_one(conn: &mut Connection, notes: &[NewNote]) -> rusqlite::Result<Vec<Remembered>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut done = Vec::with_capacity(notes.len());
    for note in notes {
        done.push(remember_one(&tx, note)?);
    }
    tx.commit()?;
    Ok(done)
}

/// Stores a note under the next id of (user, project), unless an equal note is there.
fn remember_one(conn: &Connection, note: &NewNote) -> rusqlite::Result<Remembered> {
    let folded = note.text.folded();
    let hash = norm_hash(&folded);
    let project = note.project_id.as_str();
    let mut find = conn.prepare_cached(FIND_EQUAL)?;
    let mut rows = find.query(params![note.user_id, project, hash])?;
    while let Some(row) = rows.next()? {
        let text: String = row.get(1)?;
        if folds_to(&text, &folded) {
            return Ok(Remembered {
                id: NoteId::from_stored(row.get(0)?),
                created: false,
            });
        }
    }
    let seq = next_seq(conn, &note.user_id, project, 1)?;
    let id = insert(conn, note, seq, &hash)?;
    Ok(Remembered { id, created: true })
}

/// Moves (user, project)'s id counter on by `count`; the last number taken.
fn next_seq(conn: &Connection, user: &str, project: &str, count: i64) -> rusqlite::Result<i64> {
    conn.prepare_cached(NEXT_SEQ)?
        .query_row(params![user, project, count], |row| row.get(0))
}

/// Inserts the note as number `seq` with its full-text row; its id.
fn insert(conn: &Connection, note: &NewNote, seq: i64, hash: &str) -> rusqlite::Result<NoteId> {
    let project = note.project_id.as_str();
    let id = NoteId::issue(&note.user_id, project, seq);
    let pk: i64 = conn.prepare_cached(INSERT_NOTE)?.query_row(
        params![
            id.as_str(),
            note.user_id,
            project,
            seq,
            note.text.as_str(),
            hash,
            note.author.as_str(),
            note.mem_type.as_str(),
            note.created_at
        ],
        |row| row.get(0),
    )?;
    conn.prepare_cached(INSERT_FTS)?.execute(params![
        pk,
        note.text.as_str(),
        scope_token(&note.user_id, project)
    ])?;
    Ok(id)
}
