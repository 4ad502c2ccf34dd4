//! Injection from memory: per-(user, project) note indexes (`store::lexical`), bounded and LRU over
//! projects, checked against the project's write version on every leg.
//!
//! A leg asks one statement for the project's write version. When the index it holds was read at
//! that version, ranking happens in memory. Otherwise one background task reads the project again
//! (only the notes added since, when nothing was edited or deleted) and the leg waits for it at
//! most `relevance::BUILD_WAIT`; past that it takes the SQL path (FTS5's bm25) and the task goes on for the
//! next legs. The version is bumped by triggers in the writing transaction (migration 0003), so a
//! write by any process sharing the file is seen at the next leg.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use sqlx::sqlite::SqlitePool;
use tokio::sync::watch;

use super::snapshot::{SnapshotReader, snapshot};
use super::vectors::vectors_after;
use crate::store::lexical::{LexIndex, Row};
use crate::store::rows::{NoteRow, note_columns};
use crate::store::vectors::{self, QueryVector, SharedVectors};
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

/// One project's index and the versions it was read at.
pub struct ProjectIndex {
    /// The project's write version the index was read at.
    version: i64,
    /// The version of the project's last edit or delete when it was read: while that stays, the
    /// index only needs the notes added since.
    rewritten: i64,
    lex: LexIndex,
    /// The project's note vectors, kept from one index of the project to the next.
    vectors: SharedVectors,
}

enum Slot {
    Ready(Arc<ProjectIndex>),
    /// Read at this version and found too big: the SQL path until it changes.
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
            Self::Ready(ix) => ix.lex.note_count(),
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
    /// Reads under way, each telling its waiters when it is done.
    building: HashMap<Key, watch::Receiver<bool>>,
}

/// The indexes of one store.
pub struct Injection {
    /// The per-leg snapshot read inline; `None` reads it through sqlx.
    reader: Option<SnapshotReader>,
    projects: Mutex<Projects>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Injection {
    pub fn new(reader: Option<SnapshotReader>) -> Arc<Self> {
        Arc::new(Self {
            reader,
            projects: Mutex::new(Projects::default()),
        })
    }

    /// The notes to inject, from memory; `None` when this leg must take the SQL path (no current
    /// index).
    pub async fn notes(
        self: &Arc<Self>,
        pool: &SqlitePool,
        user_id: &str,
        project_id: &str,
        query: &str,
        near: Option<&QueryVector>,
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
                let mut done = self.rebuild_later(pool, user_id, project_id);
                // Past the wait (or should the task fail) this leg ranks by SQL.
                let _ = tokio::time::timeout(relevance::BUILD_WAIT, done.wait_for(|d| *d)).await;
                match self.current(user_id, project_id, version) {
                    Current::Ready(ix) => ix,
                    _ => return Ok(None),
                }
            }
        };
        let Some(near) = near else {
            return Ok(Some(index.lex.inject(query, budget)));
        };
        if let Some(all) = index.lex.whole(budget) {
            return Ok(Some(all));
        }
        let after = vectors::lock(&index.vectors).read_after(&near.model, index.lex.note_count());
        match vectors_after(pool, user_id, project_id, &near.model, after).await {
            Ok(rows) => {
                let mut set = vectors::lock(&index.vectors);
                set.add(rows);
                Ok(Some(index.lex.inject_near(query, near, &set, budget)))
            }
            Err(e) => {
                // The vectors cannot be read: this leg ranks lexically, as without embeddings.
                tracing::debug!(error = %e, "note vectors not read; lexical ranking");
                Ok(Some(index.lex.inject(query, budget)))
            }
        }
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

    /// Starts one background read of the project unless one is under way; the receiver turns
    /// `true` when it is done.
    fn rebuild_later(
        self: &Arc<Self>,
        pool: &SqlitePool,
        user_id: &str,
        project_id: &str,
    ) -> watch::Receiver<bool> {
        let key = (user_id.to_owned(), project_id.to_owned());
        let (tx, rx) = watch::channel(false);
        {
            let mut p = lock(&self.projects);
            if let Some(under_way) = p.building.get(&key) {
                return under_way.clone();
            }
            p.building.insert(key.clone(), rx.clone());
        }
        let this = self.clone();
        let pool = pool.clone();
        tokio::spawn(async move {
            if let Err(e) = this.build(&pool, &key.0, &key.1).await {
                tracing::warn!(error = %e, "note index not built; injection stays on SQL");
            }
            lock(&this.projects).building.remove(&key);
            let _ = tx.send(true);
        });
        rx
    }

    /// The project's notes with a pk above `after`, in the index's row shape.
    async fn rows_after(
        pool: &SqlitePool,
        user_id: &str,
        project_id: &str,
        after: i64,
    ) -> StoreResult<Vec<Row>> {
        let rows: Vec<IndexRow> = sqlx::query_as(concat!(
            "SELECT pk, seq, ",
            note_columns!(),
            " FROM notes WHERE user_id = ? AND project_id = ? AND pk > ?"
        ))
        .bind(user_id)
        .bind(project_id)
        .bind(after)
        .fetch_all(pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| Row {
                order: r.pk,
                seq: r.seq,
                note: r.note.into(),
            })
            .collect())
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
        let base = held
            .as_ref()
            .filter(|ix| ix.rewritten == rewritten && ix.version <= version);
        let rows = Self::rows_after(
            pool,
            user_id,
            project_id,
            base.map_or(i64::MIN, |ix| ix.lex.last_order()),
        )
        .await?;
        let total = rows.len() + base.map_or(0, |ix| ix.lex.note_count());
        let vectors = held
            .as_ref()
            .map(|ix| ix.vectors.clone())
            .unwrap_or_default();
        let slot = if total > MAX_INDEXED_NOTES {
            Slot::Unindexed(version)
        } else {
            let built = match base {
                Some(ix) => ix.lex.clone().extended(rows),
                None => LexIndex::build(rows),
            };
            built.map_or(Slot::Unindexed(version), |lex| {
                Slot::Ready(Arc::new(ProjectIndex {
                    version,
                    rewritten,
                    lex,
                    vectors,
                }))
            })
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

    #[tokio::test]
    async fn the_index_answers_every_leg_once_read_and_ranks_by_stems() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        for i in 0..1_300 {
            remember(&store, "u1", "p", &text(i), 1_000.0 + (i * 1_000) as f64).await;
            if i % 3 == 0 {
                remember(&store, "u2", "q", &text(i * 11 + 5), 1.0).await;
            }
        }
        store.build_injection_index("u1", "p").await.unwrap();
        let questions = [
            "How do I run the billing tests locally?",
            "Where are the database migrations? migrating auth",
            "timeout configured for payments handlers errors",
            "nothing matches zebracorn",
            "",
        ];
        for q in questions {
            for b in [budget(8, 6_000), budget(3, 200)] {
                let fast = store
                    .injection
                    .notes(&store.pool, "u1", "p", q, None, b)
                    .await
                    .unwrap()
                    .expect("the index is current");
                assert!(fast.len() <= b.max_notes, "question {q:?}");
                assert!(fast.iter().map(|n| n.note.len()).sum::<usize>() <= b.max_chars);
            }
        }
        // "40" is in note 40 alone: found first.
        let found = store
            .injection
            .notes(&store.pool, "u1", "p", "ref 40", None, budget(8, 6_000))
            .await
            .unwrap()
            .expect("current");
        assert_eq!(found[0].note, text(40));
        // Small projects fit whole, oldest first.
        remember(&store, "u1", "small", "one note about tests", 5.0).await;
        remember(&store, "u1", "small", "an older note", 1.0).await;
        store.build_injection_index("u1", "small").await.unwrap();
        let fast = store
            .injection
            .notes(&store.pool, "u1", "small", "tests", None, budget(8, 6_000))
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
            // Hours after the others: no neighbour of theirs.
            10_000.0,
        )
        .await;
        // A's index is stale now: the next leg never answers from it. It waits a moment for the
        // index to be extended with B's note, or ranks by SQL.
        let from_index = a
            .injection
            .notes(&a.pool, "u1", "p", q, None, budget(8, 6_000))
            .await
            .unwrap();
        assert!(from_index.is_none_or(|notes| notes.len() == 1));
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
