//! SQLite's search for the notes to inject: from the in-memory index when it is current, else by
//! SQL (the fit probe, then full-text ranking with FTS5 and bm25), and the scope token that keeps
//! each project's postings apart in the index.

use super::SqliteStore;
use crate::store::rows::{self, NoteRow, RankedRow, note_columns};
use crate::store::vectors::QueryVector;
use crate::store::{InjectBudget, Note, StoreResult, relevance};

impl SqliteStore {
    /// The project's notes most relevant to `query` by bm25, within `budget`.
    ///
    /// The full-text search is the outer loop and ranks on its own (bm25 over the window of the
    /// newest `CANDIDATE_WINDOW` matches, best 64 kept) before any note row is read: joining first
    /// let the planner run the MATCH once per note of the project, which measured 271 ms per leg
    /// with 2,000 notes (relay-bench inject) instead of about a millisecond.
    pub(super) async fn rank_notes(
        &self,
        user_id: &str,
        project_id: &str,
        query: &str,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        let terms = relevance::query_terms(query);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Every term is quoted, so nothing a user types is FTS5 syntax.
        let any_term = terms
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" OR ");
        let fts_query = format!(
            "scope : {} AND note : ({any_term})",
            scope_token(user_id, project_id)
        );
        // `MATCH (? || '')`, not `MATCH ?`: FTS5 looks at a bare parameter while planning, which
        // marks the statement to be compiled again whenever that parameter is bound, that is on
        // every leg (perf showed sqlite3Reprepare under this query). An expression keeps the
        // cached plan. For the same reason the window and the row count are written into the
        // text rather than bound: the text stays the same for the life of the process, so the
        // statement is still prepared once.
        let sql = format!(
            "SELECT n.id, n.project_id, n.note, n.author, n.mem_type, n.created_at, hits.score
             FROM (SELECT rowid AS pk, -bm25(notes_fts, 1.0, 0.0) AS score
                   FROM notes_fts
                   WHERE notes_fts MATCH (? || '')
                     AND rowid >= coalesce((SELECT rowid FROM notes_fts
                                            WHERE notes_fts MATCH (? || '')
                                            ORDER BY rowid DESC LIMIT 1 OFFSET {}), 0)
                   ORDER BY score DESC, rowid DESC
                   LIMIT {}) AS hits
             CROSS JOIN notes n ON n.pk = hits.pk
             WHERE n.user_id = ? AND n.project_id = ?
             ORDER BY hits.score DESC, n.created_at DESC, n.seq DESC",
            relevance::CANDIDATE_WINDOW - 1,
            relevance::ranked_rows(budget)
        );
        // Only two integers of our own are interpolated; user text is bound.
        let rows: Vec<RankedRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&fts_query)
            .bind(&fts_query)
            .bind(user_id)
            .bind(project_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(relevance::select(rows::ranked(rows), budget))
    }
}

/// The full-text row of a note carries a token naming its (user, project), so a search reads only
/// that project's postings instead of filtering every user's matches afterwards.
pub(super) fn scope_token(user_id: &str, project_id: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{user_id}#{project_id}").as_bytes());
    format!("s{}", hex::encode(&digest[..12]))
}

impl SqliteStore {
    /// `notes_for_injection`: from memory when the project's index is current, else by SQL.
    pub(super) async fn inject(
        &self,
        user_id: &str,
        project_id: &str,
        query: &str,
        near: Option<&QueryVector>,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        match self
            .injection
            .notes(&self.pool, user_id, project_id, query, near, budget)
            .await
        {
            Ok(Some(notes)) => return Ok(notes),
            Ok(None) => {}
            // The SQL path answers on its own; it reports the store's failure if there is one.
            Err(e) => tracing::debug!(error = %e, "note index unavailable for this leg"),
        }
        self.notes_for_injection_by_sql(user_id, project_id, query, budget)
            .await
    }

    /// Injection by SQL alone (the oldest notes to see whether the project fits whole, else
    /// FTS5's bm25), as every leg did before the index: public so benchmarks can time both.
    pub async fn notes_for_injection_by_sql(
        &self,
        user_id: &str,
        project_id: &str,
        query: &str,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        let first: Vec<NoteRow> = sqlx::query_as(concat!(
            "SELECT ",
            note_columns!(),
            " FROM notes WHERE user_id = ? AND project_id = ? ORDER BY created_at, seq LIMIT ?"
        ))
        .bind(user_id)
        .bind(project_id)
        .bind(relevance::fit_probe(budget))
        .fetch_all(&self.pool)
        .await?;
        relevance::whole_or_ranked(rows::notes(first), budget, || {
            self.rank_notes(user_id, project_id, query, budget)
        })
        .await
    }
}
