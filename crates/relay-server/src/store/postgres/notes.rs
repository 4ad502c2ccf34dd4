//! PostgreSQL queries of project memory: remember, list, edit and delete notes, the notes to
//! inject, and open-mode usage.

use async_trait::async_trait;

use super::PgStore;
use super::injection::Held;
use super::vectors::vectors_after;
use crate::domain::{NoteId, NoteText};
use crate::store::rows::{NoteRow, note_columns};
use crate::store::text::{folds_to, norm_hash};
use crate::store::vectors::{self, Quantised, QueryVector, ToEmbed};
use crate::store::{
    AuthStore, InjectBudget, MemoryStore, NewNote, Note, Remembered, StoreResult, relevance,
};

/// A page of notes and the total the same statement counted.
#[derive(sqlx::FromRow)]
struct CountedNoteRow {
    #[sqlx(flatten)]
    note: NoteRow,
    total: i64,
}

#[async_trait]
impl MemoryStore for PgStore {
    async fn remember(&self, note: NewNote) -> StoreResult<Remembered> {
        let folded = note.text.folded();
        let hash = norm_hash(&folded);
        let project = note.project_id.as_str();
        let mut tx = self.pool.begin().await?;
        // The upsert comes first: it takes the counter row's lock, so every other remember into
        // this project, on any instance, waits here until this transaction ends. The duplicate
        // check below then sees every note committed before it, and two equal notes written at
        // once cannot both be stored. A duplicate rolls back, which also undoes the increment, so
        // the ids stay gap-free.
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO note_counters (user_id, project_id, last_seq) VALUES ($1, $2, 1)
             ON CONFLICT (user_id, project_id) DO UPDATE SET last_seq = note_counters.last_seq + 1
             RETURNING last_seq",
        )
        .bind(&note.user_id)
        .bind(project)
        .fetch_one(&mut *tx)
        .await?;
        let existing: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, note FROM notes WHERE user_id = $1 AND project_id = $2 AND norm_hash = $3",
        )
        .bind(&note.user_id)
        .bind(project)
        .bind(&hash)
        .fetch_all(&mut *tx)
        .await?;
        if let Some((id, _)) = existing
            .into_iter()
            .find(|(_, text)| folds_to(text, &folded))
        {
            tx.rollback().await?;
            return Ok(Remembered {
                id: NoteId::from_stored(id),
                created: false,
            });
        }
        let id = NoteId::issue(&note.user_id, project, seq);
        sqlx::query(
            "INSERT INTO notes (id, user_id, project_id, seq, note, norm_hash, author, mem_type, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(id.as_str())
        .bind(&note.user_id)
        .bind(project)
        .bind(seq)
        .bind(note.text.as_str())
        .bind(&hash)
        .bind(note.author.as_str())
        .bind(note.mem_type.as_str())
        .bind(note.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Remembered { id, created: true })
    }

    async fn recall(
        &self,
        user_id: &str,
        project_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<String>> {
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT note FROM (
                SELECT note, created_at, seq FROM notes WHERE user_id = $1 AND project_id = $2
                ORDER BY created_at DESC, seq DESC LIMIT $3
             ) AS newest ORDER BY created_at, seq",
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
        // The window count is the total of the same snapshot the page comes from. A page past the
        // end has no row to carry it, so the total is then counted on its own. One statement per
        // selector, so each is planned with its own index; the project, when given, is `$2` in
        // both, so the binds below follow either.
        let (page_sql, count_sql) = match project_id {
            Some(_) => (
                concat!(
                    "SELECT ",
                    note_columns!(),
                    ", count(*) OVER () AS total FROM notes WHERE user_id = $1 AND project_id = $2
                     ORDER BY created_at, id LIMIT $3 OFFSET $4"
                ),
                "SELECT count(*) FROM notes WHERE user_id = $1 AND project_id = $2",
            ),
            None => (
                concat!(
                    "SELECT ",
                    note_columns!(),
                    ", count(*) OVER () AS total FROM notes WHERE user_id = $1
                     ORDER BY created_at, id LIMIT $2 OFFSET $3"
                ),
                "SELECT count(*) FROM notes WHERE user_id = $1",
            ),
        };
        let mut page = sqlx::query_as::<_, CountedNoteRow>(page_sql).bind(user_id);
        if let Some(p) = project_id {
            page = page.bind(p);
        }
        let rows = page
            .bind(i64::from(limit))
            .bind(i64::try_from(offset).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        let total = match rows.first() {
            Some(r) => r.total,
            None => {
                let mut count = sqlx::query_scalar::<_, i64>(count_sql).bind(user_id);
                if let Some(p) = project_id {
                    count = count.bind(p);
                }
                count.fetch_one(&self.pool).await?
            }
        };
        let notes = rows.into_iter().map(|r| Note::from(r.note)).collect();
        Ok((u64::try_from(total).unwrap_or(0), notes))
    }

    async fn delete_note(&self, user_id: &str, id: &NoteId) -> StoreResult<u64> {
        // The full-text vector is a column of the row, so it goes with it.
        Ok(
            sqlx::query("DELETE FROM notes WHERE user_id = $1 AND id = $2")
                .bind(user_id)
                .bind(id.as_str())
                .execute(&self.pool)
                .await?
                .rows_affected(),
        )
    }

    async fn delete_project(&self, user_id: &str, project_id: &str) -> StoreResult<u64> {
        // The counter row stays: ids are never reused after a delete.
        Ok(
            sqlx::query("DELETE FROM notes WHERE user_id = $1 AND project_id = $2")
                .bind(user_id)
                .bind(project_id)
                .execute(&self.pool)
                .await?
                .rows_affected(),
        )
    }

    async fn get_note(&self, user_id: &str, id: &NoteId) -> StoreResult<Option<Note>> {
        let row: Option<NoteRow> = sqlx::query_as(concat!(
            "SELECT ",
            note_columns!(),
            " FROM notes WHERE user_id = $1 AND id = $2"
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
        // `search` is generated from `note`, so the index follows the edit in this same statement.
        let row: Option<NoteRow> = sqlx::query_as(concat!(
            "UPDATE notes SET note = $1, norm_hash = $2 WHERE user_id = $3 AND id = $4 RETURNING ",
            note_columns!()
        ))
        .bind(text.as_str())
        .bind(norm_hash(&text.folded()))
        .bind(user_id)
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(Note::from))
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
        self.writes.open_leg.submit(()).await
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
        let mut tx = self.pool.begin().await?;
        // The id counters stay (they hold no note text), so an id is never reused. Locking them
        // first waits for any remember of this user still holding one, so the notes deleted next
        // include the one it committed.
        sqlx::query("SELECT 1 FROM note_counters WHERE user_id = $1 FOR UPDATE")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let deleted = sqlx::query("DELETE FROM notes WHERE user_id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        self.injected.forget_user(user_id);
        Ok(deleted)
    }

    async fn forget_counters(&self, user_id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM note_counters WHERE user_id = $1")
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        AuthStore::ping(self).await
    }
}

impl PgStore {
    /// `notes_for_injection`, fused with `near` when given (issue 44).
    async fn inject(
        &self,
        user_id: &str,
        project_id: &str,
        query: &str,
        near: Option<&QueryVector>,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        let Some(version) = self.injected.version(user_id, project_id).await? else {
            let terms = relevance::query_terms(query);
            return self.search_notes(user_id, project_id, &terms, budget).await;
        };
        let lex = match self.injected.get(user_id, project_id, version) {
            Held::Ready(lex) => lex,
            Held::TooBig => {
                let terms = relevance::query_terms(query);
                return self.search_notes(user_id, project_id, &terms, budget).await;
            }
            Held::Stale => {
                let mut done = self.injected.refresh(&self.pool, user_id, project_id);
                // Past the wait (or should the read fail) this leg ranks in the database.
                let _ = tokio::time::timeout(relevance::BUILD_WAIT, done.wait_for(|d| *d)).await;
                match self.injected.get(user_id, project_id, version) {
                    Held::Ready(lex) => lex,
                    _ => {
                        let terms = relevance::query_terms(query);
                        return self.search_notes(user_id, project_id, &terms, budget).await;
                    }
                }
            }
        };
        let Some(near) = near else {
            return Ok(lex.inject(query, budget));
        };
        if let Some(all) = lex.whole(budget) {
            return Ok(all);
        }
        let Some(shared) = self.injected.vectors(user_id, project_id) else {
            return Ok(lex.inject(query, budget));
        };
        let after = vectors::lock(&shared).read_after(&near.model, lex.note_count());
        match vectors_after(&self.pool, user_id, project_id, &near.model, after).await {
            Ok(rows) => {
                let mut set = vectors::lock(&shared);
                set.add(rows);
                Ok(lex.inject_near(query, near, &set, budget))
            }
            Err(e) => {
                // The vectors cannot be read: this leg ranks lexically, as without embeddings.
                tracing::debug!(error = %e, "note vectors not read; lexical ranking");
                Ok(lex.inject(query, budget))
            }
        }
    }
}
