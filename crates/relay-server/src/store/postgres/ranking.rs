//! PostgreSQL's search for the notes to inject: the fit probe, then full-text ranking (`ts_rank`
//! over the generated `search` column).

use super::PgStore;
use crate::store::rows::{self, NoteRow, RankedRow, note_columns};
use crate::store::{InjectBudget, Note, StoreResult, relevance};

impl PgStore {
    /// The notes to inject, searched in the database: the whole project, oldest first, when it
    /// fits the budget, otherwise the ranking below. `terms` are the question's
    /// (`relevance::query_terms`).
    pub(super) async fn search_notes(
        &self,
        user_id: &str,
        project_id: &str,
        terms: &[String],
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        let first: Vec<NoteRow> = sqlx::query_as(concat!(
            "SELECT ",
            note_columns!(),
            " FROM notes WHERE user_id = $1 AND project_id = $2 ORDER BY created_at, seq LIMIT $3"
        ))
        .bind(user_id)
        .bind(project_id)
        .bind(relevance::fit_probe(budget))
        .fetch_all(&self.pool)
        .await?;
        relevance::whole_or_ranked(rows::notes(first), budget, || {
            self.rank_notes(user_id, project_id, terms, budget)
        })
        .await
    }

    /// The project's notes most relevant to the question's `terms` by ts_rank, within `budget`;
    /// ranked among the newest `CANDIDATE_WINDOW` matches, as the SQLite backend does.
    async fn rank_notes(
        &self,
        user_id: &str,
        project_id: &str,
        terms: &[String],
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Each term is its own plainto_tsquery (stemmed like the notes, stopwords dropped) and the
        // terms are ORed by the migration's aggregate: user text is bound as data and never parsed
        // as tsquery syntax. ts_rank with normalisation 1 divides by the log of the note's length,
        // as bm25 discounts long notes in the SQLite backend; ties go to the newest.
        // The query is built once (a MATERIALIZED CTE): as a subquery in FROM the planner may put
        // it on the inner side of a nested loop and rebuild it for every note of the project,
        // which made this statement cost 6-10 ms of PostgreSQL CPU with 300 notes.
        let rows: Vec<RankedRow> = sqlx::query_as(
            "WITH q AS MATERIALIZED (
                 SELECT relay_tsquery_or(plainto_tsquery('english', term)) AS query
                 FROM unnest($3::text[]) AS term
             )
             SELECT w.id, w.project_id, w.note, w.author, w.mem_type, w.created_at,
                    ts_rank(w.search, w.query, 1)::float8 AS score
             FROM (SELECT n.id, n.project_id, n.note, n.author, n.mem_type, n.created_at, n.seq,
                          n.search, q.query
                   FROM q, notes n
                   WHERE n.user_id = $1 AND n.project_id = $2 AND n.search @@ q.query
                   ORDER BY n.created_at DESC, n.seq DESC
                   LIMIT $4) AS w
             ORDER BY score DESC, w.created_at DESC, w.seq DESC
             LIMIT $5",
        )
        .bind(user_id)
        .bind(project_id)
        .bind(terms)
        .bind(relevance::CANDIDATE_WINDOW)
        .bind(relevance::ranked_rows(budget))
        .fetch_all(&self.pool)
        .await?;
        Ok(relevance::select(rows::ranked(rows), budget))
    }
}
