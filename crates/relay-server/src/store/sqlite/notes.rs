//! SQLite queries of project memory: remember, list, edit and delete notes (keeping the FTS5 index
//! in step in the same transaction), the notes to inject, and open-mode usage.

use async_trait::async_trait;

use super::SqliteStore;
use crate::domain::{NoteId, NoteText};
use crate::store::rows::{self, NoteRow, note_columns};
use crate::store::text::norm_hash;
use crate::store::vectors::{Quantised, QueryVector, ToEmbed};
use crate::store::{AuthStore, InjectBudget, MemoryStore, NewNote, Note, Remembered, StoreResult};

/// An edited note and its row key, which names its full-text row.
#[derive(sqlx::FromRow)]
struct EditedRow {
    pk: i64,
    #[sqlx(flatten)]
    note: NoteRow,
}

/// Removes the full-text rows of the notes `selector` picks, then the notes; in the caller's transaction.
async fn delete_notes_where(
    tx: &mut sqlx::SqliteConnection,
    selector: &'static str,
    binds: &[&str],
) -> StoreResult<u64> {
    let fts = match selector {
        "id" => {
            "DELETE FROM notes_fts WHERE rowid IN (SELECT pk FROM notes WHERE user_id = ? AND id = ?)"
        }
        "project" => {
            "DELETE FROM notes_fts WHERE rowid IN (SELECT pk FROM notes WHERE user_id = ? AND project_id = ?)"
        }
        _ => "DELETE FROM notes_fts WHERE rowid IN (SELECT pk FROM notes WHERE user_id = ?)",
    };
    let notes = match selector {
        "id" => "DELETE FROM notes WHERE user_id = ? AND id = ?",
        "project" => "DELETE FROM notes WHERE user_id = ? AND project_id = ?",
        _ => "DELETE FROM notes WHERE user_id = ?",
    };
    let mut q = sqlx::query(fts);
    for b in binds {
        q = q.bind(*b);
    }
    q.execute(&mut *tx).await?;
    let mut q = sqlx::query(notes);
    for b in binds {
        q = q.bind(*b);
    }
    Ok(q.execute(&mut *tx).await?.rows_affected())
}

#[async_trait]
impl MemoryStore for SqliteStore {
    async fn remember(&self, note: NewNote) -> StoreResult<Remembered> {
        // Concurrent remembers share one transaction on the note writer (see `writer`).
        self.remembers.submit(note).await?
    }

    async fn recall(
        &self,
        user_id: &str,
        project_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<String>> {
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT note FROM (
                SELECT note, created_at, seq FROM notes WHERE user_id = ? AND project_id = ?
                ORDER BY created_at DESC, seq DESC LIMIT ?
             ) ORDER BY created_at, seq",
        )
        .bind(user_id)
        .bind(project_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    async fn list_notes(
        &self,
        user_id: &str,
        project_id: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(u64, Vec<Note>)> {
        // One statement per selector, so each is planned with its own index; the project, when
        // given, follows the user in both, so the binds below serve either.
        let (count_sql, page_sql) = match project_id {
            Some(_) => (
                "SELECT count(*) FROM notes WHERE user_id = ? AND project_id = ?",
                concat!(
                    "SELECT ",
                    note_columns!(),
                    " FROM notes WHERE user_id = ? AND project_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?"
                ),
            ),
            None => (
                "SELECT count(*) FROM notes WHERE user_id = ?",
                concat!(
                    "SELECT ",
                    note_columns!(),
                    " FROM notes WHERE user_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?"
                ),
            ),
        };
        let mut count = sqlx::query_scalar::<_, i64>(count_sql).bind(user_id);
        let mut page = sqlx::query_as::<_, NoteRow>(page_sql).bind(user_id);
        if let Some(p) = project_id {
            count = count.bind(p);
            page = page.bind(p);
        }
        let total = count.fetch_one(&self.pool).await?;
        let rows = page
            .bind(i64::from(limit))
            .bind(i64::try_from(offset).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        Ok((u64::try_from(total).unwrap_or(0), rows::notes(rows)))
    }

    async fn delete_note(&self, user_id: &str, id: &NoteId) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let n = delete_notes_where(&mut tx, "id", &[user_id, id.as_str()]).await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn delete_project(&self, user_id: &str, project_id: &str) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let n = delete_notes_where(&mut tx, "project", &[user_id, project_id]).await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn get_note(&self, user_id: &str, id: &NoteId) -> StoreResult<Option<Note>> {
        let row: Option<NoteRow> = sqlx::query_as(concat!(
            "SELECT ",
            note_columns!(),
            " FROM notes WHERE user_id = ? AND id = ?"
        ))
        .bind(user_id)
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(Note::from))
    }

    async fn edit_note(
        &self,
        user_id: &str,
        id: &NoteId,
        text: &NoteText,
    ) -> StoreResult<Option<Note>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row: Option<EditedRow> = sqlx::query_as(concat!(
            "UPDATE notes SET note = ?, norm_hash = ? WHERE user_id = ? AND id = ? RETURNING pk, ",
            note_columns!()
        ))
        .bind(text.as_str())
        .bind(norm_hash(&text.folded()))
        .bind(user_id)
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(None);
        };
        sqlx::query("UPDATE notes_fts SET note = ? WHERE rowid = ?")
            .bind(text.as_str())
            .bind(row.pk)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(row.note.into()))
    }

    async fn notes_for_injection(
        &self,
        user_id: &str,
        project_id: &str,
        query: &str,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        self.inject(user_id, project_id, query, None, budget).await
    }

    async fn notes_for_injection_near(
        &self,
        user_id: &str,
        project_id: &str,
        query: &str,
        near: &QueryVector,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        self.inject(user_id, project_id, query, Some(near), budget)
            .await
    }

    async fn notes_to_embed(&self, model: &str, limit: u32) -> StoreResult<Vec<ToEmbed>> {
        self.to_embed(model, limit).await
    }

    async fn put_vectors(
        &self,
        model: &str,
        vectors: Vec<(ToEmbed, Quantised)>,
    ) -> StoreResult<()> {
        self.put(model, vectors).await
    }

    async fn count_open_leg(&self) -> StoreResult<()> {
        self.writes.batched.open_leg.submit(()).await
    }

    async fn open_legs(&self) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT used FROM open_usage WHERE id = 1")
                .fetch_optional(&self.pool)
                .await?
                .unwrap_or(0),
        )
    }

    async fn delete_all_notes(&self, user_id: &str) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query(
            "DELETE FROM notes_fts WHERE rowid IN (SELECT pk FROM notes WHERE user_id = ?)",
        )
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        let deleted = sqlx::query("DELETE FROM notes WHERE user_id = ?")
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        // The id counters stay (they hold no note text): an id is never reused, even after this.
        tx.commit().await?;
        self.injection.forget_user(user_id);
        Ok(deleted)
    }

    async fn forget_counters(&self, user_id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM note_counters WHERE user_id = ?")
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        AuthStore::ping(self).await
    }

    async fn close(&self) {
        self.checkpoints.empty_the_log().await;
    }
}
