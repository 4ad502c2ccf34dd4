//! SQLite's note vectors (issue 44, migration 0044): the notes still to embed, storing vectors,
//! and reading a project's vectors written since an instance last looked.

use sqlx::sqlite::SqlitePool;

use super::SqliteStore;
use crate::domain::NoteId;
use crate::store::StoreResult;
use crate::store::vectors::{Quantised, ToEmbed, VectorRow};

impl SqliteStore {
    /// Newest first: a new note is found at the head of the scan, not after every embedded one.
    pub(super) async fn to_embed(&self, model: &str, limit: u32) -> StoreResult<Vec<ToEmbed>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT n.id, n.note FROM notes n
             WHERE NOT EXISTS (SELECT 1 FROM note_vectors v WHERE v.note_id = n.id AND v.model = ?)
             ORDER BY n.pk DESC LIMIT ?",
        )
        .bind(model)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, text)| ToEmbed {
                id: NoteId::from_stored(id),
                text,
            })
            .collect())
    }

    /// On the note writer (`writer::NoteWriter::put_vectors`), beside the remembers.
    pub(super) async fn put(
        &self,
        model: &str,
        vectors: Vec<(ToEmbed, Quantised)>,
    ) -> StoreResult<()> {
        self.writer.put_vectors(model.to_owned(), vectors).await
    }
}

/// The project's vectors of `model` written after `after` (a `vid`).
pub(super) async fn vectors_after(
    pool: &SqlitePool,
    user_id: &str,
    project_id: &str,
    model: &str,
    after: i64,
) -> StoreResult<Vec<VectorRow>> {
    Ok(sqlx::query_as(
        "SELECT vid, note_id, scale, vec FROM note_vectors
         WHERE user_id = ? AND project_id = ? AND model = ? AND vid > ? ORDER BY vid",
    )
    .bind(user_id)
    .bind(project_id)
    .bind(model)
    .bind(after)
    .fetch_all(pool)
    .await?)
}
