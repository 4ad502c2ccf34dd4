//! Injection from memory: per-(user, project) note indexes, bounded and LRU over projects, checked
//! against the project's write version on every leg.
//!
//! A leg asks one statement for the project's write version and FTS5's table figures. When the
//! index it holds was read at that version, ranking happens in memory (`note_index`); otherwise the
//! leg takes the SQL path and the index is read again in the background, so no leg waits for a
//! rebuild. The version is bumped by triggers in the writing transaction (migration 0003), so a
//! write by any process sharing the file is seen at the next leg.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use sqlx::Row;
use sqlx::sqlite::SqlitePool;

use super::note_index::{IndexedRow, ProjectIndex, ascii_tokens, stem_is_identity};
use super::snapshot::{SnapshotReader, snapshot};
use super::stemmer::Stemmer;
use crate::store::rows::{NoteRow, note_columns};
use crate::store::{InjectBudget, Note, StoreResult, relevance};

/// Notes kept in memory over all indexed projects; least recently used projects go first. A
/// project bigger than this is never indexed and always takes the SQL path.
const MAX_INDEXED_NOTES: usize = 250_000;

type Key = (String, String);

/// A note row with what the index orders by.
#[derive(sqlx::FromRow)]
struct IndexRow {
    pk: i64,
    seq: i64,
    #[sqlx(flatten)]
    note: NoteRow,
}

enum Slot {
    Ready(Arc<ProjectIndex>),
    /// Read at this version and found too big or not ASCII: the SQL path until it changes.
    Unindexed(i64),
}

impl Slot {
    fn version(&self) -> i64 {
        match self {
            Self::Ready(ix) => ix.version,
            Self::Unindexed(v) => *v,
        }
    }
    fn notes(&self) -> usize {
        match self {
            Self::Ready(ix) => ix.note_count(),
            Self::Unindexed(_) => 0,
        }
    }
}

enum Current {
    Ready(Arc<ProjectIndex>),
    Unindexed,
    Stale,
}

#[derive(Default)]
struct Projects {
    slots: HashMap<Key, (Slot, u64)>,
    clock: u64,
    notes: usize,
    building: HashSet<Key>,
}

/// Document frequencies of terms over the whole table, valid while FTS5's structure record (which
/// every committed write to the index changes) stays the same.
#[derive(Default)]
struct Frequencies {
    structure: Vec<u8>,
    hits: HashMap<String, i64>,
}

/// The indexes of one store.
pub struct Injection {
    /// The per-leg snapshot read inline; `None` reads it through sqlx.
    reader: Option<SnapshotReader>,
    projects: Mutex<Projects>,
    frequencies: Mutex<Frequencies>,
    stemmer: Stemmer,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Injection {
    pub fn new(reader: Option<SnapshotReader>) -> Arc<Self> {
        Arc::new(Self {
            reader,
            projects: Mutex::new(Projects::default()),
            frequencies: Mutex::new(Frequencies::default()),
            stemmer: Stemmer::default(),
        })
    }

    /// The notes to inject, from memory; `None` when this leg must take the SQL path (no current
    /// index, or text the index does not handle).
    pub async fn notes(
        self: &Arc<Self>,
        pool: &SqlitePool,
        user_id: &str,
        project_id: &str,
        query: &str,
        budget: InjectBudget,
    ) -> StoreResult<Option<Vec<Note>>> {
        let inline = self.reader.as_ref().map(|r| r.read(user_id, project_id));
        let snap = match inline {
            Some(Ok(snap)) => snap,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "injection snapshot read through sqlx");
                snapshot(pool, user_id, project_id).await?
            }
            None => snapshot(pool, user_id, project_id).await?,
        };
        let Some((version, _)) = snap.version else {
            // No counter: the project never had a note, or its counters were forgotten.
            self.forget(user_id, project_id);
            return Ok(None);
        };
        let index = match self.current(user_id, project_id, version) {
            Current::Ready(ix) => ix,
            Current::Unindexed => return Ok(None),
            Current::Stale => {
                self.rebuild_later(pool, user_id, project_id);
                return Ok(None);
            }
        };
        if let Some(all) = index.whole(budget) {
            return Ok(Some(all));
        }
        let terms = relevance::query_terms(query);
        if terms.is_empty() {
            return Ok(Some(Vec::new()));
        }
        if terms.iter().any(|t| !t.is_ascii()) {
            return Ok(None);
        }
        let Some(stats) = snap.stats else {
            return Ok(None);
        };
        let Some(hits) = self.frequencies(pool, &snap.structure, &terms).await? else {
            return Ok(None);
        };
        let stems = self.stemmer.stems_of(&terms).await?;
        let stemmed: Vec<(String, i64)> = terms
            .iter()
            .zip(hits)
            .map(|(t, h)| (stems.get(t).cloned().unwrap_or_else(|| t.clone()), h))
            .collect();
        Ok(Some(index.rank(&stemmed, stats, budget)))
    }

    /// What is held for (user, project), judged against its `version` now.
    fn current(&self, user_id: &str, project_id: &str, version: i64) -> Current {
        let mut p = lock(&self.projects);
        p.clock += 1;
        let now = p.clock;
        let Some((slot, used)) = p
            .slots
            .get_mut(&(user_id.to_owned(), project_id.to_owned()))
        else {
            return Current::Stale;
        };
        *used = now;
        match slot {
            _ if slot.version() != version => Current::Stale,
            Slot::Ready(ix) => Current::Ready(ix.clone()),
            Slot::Unindexed(_) => Current::Unindexed,
        }
    }

    /// The index held for (user, project), whatever its version.
    fn held(&self, user_id: &str, project_id: &str) -> Option<Arc<ProjectIndex>> {
        match lock(&self.projects)
            .slots
            .get(&(user_id.to_owned(), project_id.to_owned()))
        {
            Some((Slot::Ready(ix), _)) => Some(ix.clone()),
            _ => None,
        }
    }

    fn forget(&self, user_id: &str, project_id: &str) {
        let mut p = lock(&self.projects);
        if let Some((slot, _)) = p.slots.remove(&(user_id.to_owned(), project_id.to_owned())) {
            p.notes = p.notes.saturating_sub(slot.notes());
        }
    }

    /// Drops every index of `user_id`, whose notes were all deleted: none of their text stays in
    /// this process. (Another process sharing the file never serves its copy again, as the
    /// versions moved, and drops it when the project is next read or evicted.)
    pub fn forget_user(&self, user_id: &str) {
        let mut p = lock(&self.projects);
        let theirs: Vec<Key> = p
            .slots
            .keys()
            .filter(|(user, _)| user == user_id)
            .cloned()
            .collect();
        for key in theirs {
            if let Some((slot, _)) = p.slots.remove(&key) {
                p.notes = p.notes.saturating_sub(slot.notes());
            }
        }
    }

    /// Starts one background read of the project unless one is under way or the project is
    /// known to stay on the SQL path at its current version.
    fn rebuild_later(self: &Arc<Self>, pool: &SqlitePool, user_id: &str, project_id: &str) {
        let key = (user_id.to_owned(), project_id.to_owned());
        if !lock(&self.projects).building.insert(key.clone()) {
            return;
        }
        let this = self.clone();
        let pool = pool.clone();
        tokio::spawn(async move {
            if let Err(e) = this.build(&pool, &key.0, &key.1).await {
                tracing::warn!(error = %e, "note index not built; injection stays on SQL");
            }
            lock(&this.projects).building.remove(&key);
        });
    }

    /// Reads (user, project) into memory now, replacing what was there.
    pub async fn build(
        &self,
        pool: &SqlitePool,
        user_id: &str,
        project_id: &str,
    ) -> StoreResult<()> {
        // The version first: rows read after it are at least as new, so the index is never
        // labelled newer than its contents.
        let Some((version, rewritten)) = snapshot(pool, user_id, project_id).await?.version else {
            self.forget(user_id, project_id);
            return Ok(());
        };
        let held = self.held(user_id, project_id);
        // Only notes added since the held index was read: read those alone.
        let after = held
            .as_ref()
            .filter(|ix| ix.rewritten == rewritten && ix.version <= version)
            .map(|ix| ix.last_pk());
        let rows: Vec<IndexRow> = sqlx::query_as(concat!(
            "SELECT pk, seq, ",
            note_columns!(),
            " FROM notes WHERE user_id = ? AND project_id = ? AND pk > ?"
        ))
        .bind(user_id)
        .bind(project_id)
        .bind(after.unwrap_or(i64::MIN))
        .fetch_all(pool)
        .await?;
        let total = rows.len() + after.and(held.as_ref()).map_or(0, |ix| ix.note_count());
        let slot = if total > MAX_INDEXED_NOTES {
            Slot::Unindexed(version)
        } else {
            let rows: Vec<IndexedRow> = rows
                .into_iter()
                .map(|r| IndexedRow {
                    pk: r.pk,
                    seq: r.seq,
                    note: r.note.into(),
                })
                .collect();
            let mut words: HashSet<String> = HashSet::new();
            let mut ascii = true;
            for r in &rows {
                match ascii_tokens(&r.note.note) {
                    Some(ws) => words.extend(ws.into_iter().filter(|w| !stem_is_identity(w))),
                    None => ascii = false,
                }
            }
            let built = if ascii {
                let words: Vec<String> = words.into_iter().collect();
                let stems = self.stemmer.stems_of(&words).await?;
                match (after, held) {
                    (Some(_), Some(ix)) => ProjectIndex::clone(&ix).extended(version, rows, &stems),
                    _ => ProjectIndex::build(version, rewritten, rows, &stems),
                }
            } else {
                None
            };
            built.map_or(Slot::Unindexed(version), |ix| Slot::Ready(Arc::new(ix)))
        };
        self.store(user_id, project_id, slot);
        Ok(())
    }

    /// Keeps `slot`, dropping the least recently used projects while over the bound.
    fn store(&self, user_id: &str, project_id: &str, slot: Slot) {
        let mut p = lock(&self.projects);
        let key = (user_id.to_owned(), project_id.to_owned());
        if let Some((old, _)) = p.slots.remove(&key) {
            p.notes = p.notes.saturating_sub(old.notes());
        }
        while p.notes + slot.notes() > MAX_INDEXED_NOTES {
            let Some(oldest) = p
                .slots
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((old, _)) = p.slots.remove(&oldest) {
                p.notes = p.notes.saturating_sub(old.notes());
            }
        }
        p.clock += 1;
        let now = p.clock;
        p.notes += slot.notes();
        p.slots.insert(key, (slot, now));
    }

    /// Each term's number of rows holding it in the note column, over the whole table, as bm25
    /// counts them; `None` when the table changed between this and the leg's snapshot.
    async fn frequencies(
        &self,
        pool: &SqlitePool,
        structure: &[u8],
        terms: &[String],
    ) -> StoreResult<Option<Vec<i64>>> {
        let missing: Vec<String> = {
            let mut f = lock(&self.frequencies);
            if f.structure != structure {
                f.structure = structure.to_vec();
                f.hits.clear();
            }
            terms
                .iter()
                .filter(|t| !f.hits.contains_key(*t))
                .cloned()
                .collect()
        };
        if !missing.is_empty() {
            let counts = missing
                .iter()
                .map(|_| "(SELECT count(*) FROM notes_fts WHERE notes_fts MATCH (? || ''))")
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!("SELECT (SELECT block FROM notes_fts_data WHERE id = 10), {counts}");
            // Only placeholders are interpolated; the terms are bound.
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for t in &missing {
                // Quoted: a term is letters and digits, so nothing in it is FTS5 syntax.
                q = q.bind(format!("note : \"{t}\""));
            }
            let row = q.fetch_one(pool).await?;
            let now: Option<Vec<u8>> = row.try_get(0)?;
            if now.unwrap_or_default() != structure {
                return Ok(None);
            }
            let mut f = lock(&self.frequencies);
            if f.structure == structure {
                for (i, t) in missing.iter().enumerate() {
                    f.hits.insert(t.clone(), row.try_get::<i64, _>(i + 1)?);
                }
            }
        }
        let f = lock(&self.frequencies);
        if f.structure != structure {
            // Another leg saw a newer table meanwhile: these counts are not this snapshot's.
            return Ok(None);
        }
        Ok(terms.iter().map(|t| f.hits.get(t).copied()).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::{Author, MemType, NoteText, ProjectId};
    use crate::store::sqlite::SqliteStore;
    use crate::store::{MemoryStore, NewNote, StoreOptions};

    const AREAS: &[&str] = &["billing", "auth", "search", "payments", "ingest", "exports"];
    const WORDS: &[&str] = &[
        "tests",
        "testing",
        "run",
        "running",
        "migrations",
        "migrating",
        "timeout",
        "config",
        "configured",
        "crates",
        "handlers",
        "errors",
        "retries",
        "flaky",
        "database",
        "locally",
    ];

    async fn open(dir: &std::path::Path) -> SqliteStore {
        let url = format!("sqlite://{}", dir.join("t.db").display());
        let options = StoreOptions {
            max_connections: 4,
            busy_timeout: Duration::from_secs(5),
        };
        SqliteStore::open(&url, &options).await.unwrap()
    }

    /// A deterministic mix of words, repeats and numbers.
    fn text(i: usize) -> String {
        let a = AREAS[i % AREAS.len()];
        let w1 = WORDS[(i * 7) % WORDS.len()];
        let w2 = WORDS[(i * 3 + 1) % WORDS.len()];
        let w3 = WORDS[(i / 5) % WORDS.len()];
        match i % 4 {
            0 => format!("The {a} {w1} need {w2}; {a} {w1} again (ref {i})."),
            1 => format!("{w3} for {a}: use `{w2}` with 4xx and {i} items."),
            2 => format!("Run {w1} {w1} {w1} before {w3} in {a}-core."),
            _ => format!("{a} {w2} {w3} {w1} notes {i}"),
        }
    }

    async fn remember(store: &SqliteStore, user: &str, project: &str, t: &str, at: f64) {
        store
            .remember(NewNote {
                user_id: user.into(),
                project_id: ProjectId::parse(project).unwrap(),
                text: NoteText::parse(t, "note").unwrap(),
                author: Author::default(),
                mem_type: MemType::default(),
                created_at: at,
            })
            .await
            .unwrap();
    }

    fn budget(max_notes: usize, max_chars: usize) -> InjectBudget {
        InjectBudget {
            max_notes,
            max_chars,
        }
    }

    fn ids(notes: &[Note]) -> Vec<String> {
        notes.iter().map(|n| n.id.as_str().to_owned()).collect()
    }

    #[tokio::test]
    async fn memory_ranking_equals_the_sql_ranking() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        // Another project and user share the table, so frequencies are table-wide as in bm25.
        for i in 0..1_300 {
            remember(&store, "u1", "p", &text(i), 1_000.0 + (i % 50) as f64).await;
            if i % 3 == 0 {
                remember(&store, "u2", "q", &text(i * 11 + 5), 1.0).await;
            }
        }
        store.build_injection_index("u1", "p").await.unwrap();
        let questions = [
            "How do I run the billing tests locally?",
            "Where are the database migrations? migrating auth",
            "timeout configured for payments handlers errors",
            "flaky retries in ingest",
            "tests test testing run running",
            "ref 42 and 4xx",
            "exports config crates",
            "nothing matches zebracorn",
            "",
        ];
        for q in questions {
            for b in [budget(8, 6_000), budget(3, 200), budget(16, 400)] {
                let fast = store
                    .injection
                    .notes(&store.pool, "u1", "p", q, b)
                    .await
                    .unwrap()
                    .expect("the index is current");
                let slow = store
                    .notes_for_injection_by_sql("u1", "p", q, b)
                    .await
                    .unwrap();
                assert_eq!(ids(&fast), ids(&slow), "question {q:?}");
            }
        }
        // Small projects fit whole, oldest first, on both paths.
        remember(&store, "u1", "small", "one note about tests", 5.0).await;
        remember(&store, "u1", "small", "an older note", 1.0).await;
        store.build_injection_index("u1", "small").await.unwrap();
        let fast = store
            .injection
            .notes(&store.pool, "u1", "small", "tests", budget(8, 6_000))
            .await
            .unwrap()
            .expect("current");
        assert_eq!(fast.len(), 2);
        assert_eq!(fast[0].note, "an older note");
    }

    #[tokio::test]
    async fn another_instances_write_is_seen_at_the_next_leg() {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path()).await;
        let b = open(dir.path()).await;
        for i in 0..40 {
            remember(&a, "u1", "p", &text(i), 1.0).await;
        }
        a.build_injection_index("u1", "p").await.unwrap();
        let q = "zebracorn deployment";
        let before = a.notes_for_injection("u1", "p", q, budget(8, 6_000)).await;
        assert!(before.unwrap().is_empty());
        remember(
            &b,
            "u1",
            "p",
            "The zebracorn deployment runs on Fridays.",
            2.0,
        )
        .await;
        // A's index is stale now: the next leg must not answer from it.
        let from_index = a
            .injection
            .notes(&a.pool, "u1", "p", q, budget(8, 6_000))
            .await
            .unwrap();
        assert!(from_index.is_none());
        let after = a
            .notes_for_injection("u1", "p", q, budget(8, 6_000))
            .await
            .unwrap();
        assert_eq!(after.len(), 1);
        // Deleting the project through B is seen too, once A has rebuilt.
        a.build_injection_index("u1", "p").await.unwrap();
        b.delete_note("u1", &after[0].id).await.unwrap();
        let gone = a
            .notes_for_injection("u1", "p", q, budget(8, 6_000))
            .await
            .unwrap();
        assert!(gone.is_empty());
    }
}
