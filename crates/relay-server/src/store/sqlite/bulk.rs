//! Many new notes in one transaction: for filling large benchmark projects fast (one `remember`
//! transaction each would take most of a minute for 100,000 notes).

use super::SqliteStore;
use super::ranking::scope_token;
use crate::store::text::norm_hash;
use crate::store::{NewNote, StoreError, StoreResult, note_id};

impl SqliteStore {
    /// Stores `notes` (all of one user and project) in one transaction, numbered after the
    /// project's last id, with their full-text rows; unlike `remember` it does not look for equal
    /// notes already there. Returns the ids given.
    pub async fn insert_notes_bulk(&self, notes: &[NewNote]) -> StoreResult<Vec<String>> {
        let Some(first) = notes.first() else {
            return Ok(Vec::new());
        };
        let (user, project) = (first.user_id.as_str(), first.project_id.as_str());
        if notes
            .iter()
            .any(|n| n.user_id != user || n.project_id.as_str() != project)
        {
            return Err(StoreError::Internal(
                "a bulk insert takes the notes of one project".into(),
            ));
        }
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let count = i64::try_from(notes.len()).unwrap_or(i64::MAX);
        let last: i64 = sqlx::query_scalar(
            "INSERT INTO note_counters (user_id, project_id, last_seq) VALUES (?, ?, ?)
             ON CONFLICT (user_id, project_id) DO UPDATE SET last_seq = last_seq + excluded.last_seq
             RETURNING last_seq",
        )
        .bind(user)
        .bind(project)
        .bind(count)
        .fetch_one(&mut *tx)
        .await?;
        let scope = scope_token(user, project);
        let mut ids = Vec::with_capacity(notes.len());
        for (seq, note) in (last - count + 1..).zip(notes) {
            let id = note_id(user, project, seq);
            let pk: i64 = sqlx::query_scalar(
                "INSERT INTO notes (id, user_id, project_id, seq, note, norm_hash, author, mem_type, created_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING pk",
            )
            .bind(&id)
            .bind(user)
            .bind(project)
            .bind(seq)
            .bind(note.text.as_str())
            .bind(norm_hash(&note.text.folded()))
            .bind(&note.author)
            .bind(&note.mem_type)
            .bind(note.created_at)
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query("INSERT INTO notes_fts (rowid, note, scope) VALUES (?, ?, ?)")
                .bind(pk)
                .bind(note.text.as_str())
                .bind(&scope)
                .execute(&mut *tx)
                .await?;
            ids.push(id);
        }
        tx.commit().await?;
        Ok(ids)
    }
}
