//! PostgreSQL's note vectors (issue 44, migration 0044): the notes still to embed, storing vectors,
//! and reading a project's vectors written since an instance last looked.

use sqlx::PgPool;

use super::PgStore;
use crate::domain::NoteId;
use crate::store::StoreResult;
use crate::store::vectors::{Quantised, ToEmbed, VectorRow};

impl PgStore {
    /// Newest first: a new note is found at the head of the scan, not after every embedded one.
    pub(super) async fn to_embed(&self, model: &str, limit: u32) -> StoreResult<Vec<ToEmbed>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT n.id, n.note FROM notes n
             WHERE NOT EXISTS (SELECT 1 FROM note_vectors v WHERE v.note_id = n.id AND v.model = $1)
             ORDER BY n.created_at DESC, n.id DESC LIMIT $2",
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

    pub(super) async fn put(
        &self,
        model: &str,
        vectors: Vec<(ToEmbed, Quantised)>,
    ) -> StoreResult<()> {
        let mut ids = Vec::with_capacity(vectors.len());
        let mut texts = Vec::with_capacity(vectors.len());
        let mut scales = Vec::with_capacity(vectors.len());
        let mut blobs = Vec::with_capacity(vectors.len());
        for (note, v) in vectors {
            ids.push(note.id.into_string());
            texts.push(note.text);
            scales.push(v.scale);
            blobs.push(v.bytes);
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM note_vectors WHERE note_id = ANY($1)")
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
        // Only while the note is there with the text that was embedded.
        sqlx::query(
            "INSERT INTO note_vectors (note_id, user_id, project_id, model, scale, vec)
             SELECT n.id, n.user_id, n.project_id, $5, v.scale, v.vec
             FROM unnest($1::text[], $2::text[], $3::real[], $4::bytea[]) AS v(id, note, scale, vec)
             JOIN notes n ON n.id = v.id AND n.note = v.note
             ON CONFLICT (note_id) DO NOTHING",
        )
        .bind(&ids)
        .bind(&texts)
        .bind(&scales)
        .bind(&blobs)
        .bind(model)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// The project's vectors of `model` written after `after` (a `vid`).
pub(super) async fn vectors_after(
    pool: &PgPool,
    user_id: &str,
    project_id: &str,
    model: &str,
    after: i64,
) -> StoreResult<Vec<VectorRow>> {
    Ok(sqlx::query_as(
        "SELECT vid, note_id, scale, vec FROM note_vectors
         WHERE user_id = $1 AND project_id = $2 AND model = $3 AND vid > $4 ORDER BY vid",
    )
    .bind(user_id)
    .bind(project_id)
    .bind(model)
    .bind(after)
    .fetch_all(pool)
    .await?)
}
