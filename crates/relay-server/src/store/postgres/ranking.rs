//! PostgreSQL's search for the notes to inject: a project's notes read into the in-memory ranker
//! (`store::lexical`), or for a project without a counter or too big to hold, the fit probe, then
//! full-text ranking (`ts_rank` over the generated `search` column).

use sqlx::PgPool;

use super::PgStore;
use crate::store::lexical::{LexIndex, Row};
use crate::store::rows::{self, NoteRow, RankedRow, note_columns};
use crate::store::{InjectBudget, Note, StoreResult, relevance};

/// A note row with its per-project sequence number, the index's write order.
#[derive(sqlx::FromRow)]
struct SeqRow {
    seq: i64,
    #[sqlx(flatten)]
    note: NoteRow,
}

/// The project's notes as an index (`None` when it has more than `max` notes), with the write
/// version read before them, so the index is never labelled newer than its contents; `None` when
/// the project has no counter.
pub(super) async fn read_index(
    pool: &PgPool,
    user_id: &str,
    project_id: &str,
    max: usize,
) -> StoreResult<Option<(i64, Option<LexIndex>)>> {
    let version: Option<i64> = sqlx::query_scalar(
        "SELECT version FROM note_counters WHERE user_id = $1 AND project_id = $2",
    )
    .bind(user_id)
    .bind(project_id)
    .fetch_optional(pool)
    .await?;
    let Some(version) = version else {
        return Ok(None);
    };
    let rows: Vec<SeqRow> = sqlx::query_as(concat!(
        "SELECT seq, ",
        note_columns!(),
        " FROM notes WHERE user_id = $1 AND project_id = $2 ORDER BY seq LIMIT $3"
    ))
    .bind(user_id)
    .bind(project_id)
    .bind(i64::try_from(max).unwrap_or(i64::MAX).saturating_add(1))
    .fetch_all(pool)
    .await?;
    if rows.len() > max {
        return Ok(Some((version, None)));
    }
    let rows = rows
        .into_iter()
        .map(|r| Row {
            order: r.seq,
            seq: r.seq,
            note: r.note.into(),
        })
        .collect();
    Ok(Some((version, LexIndex::build(rows))))
}

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
