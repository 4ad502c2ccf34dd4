//! Each instance's in-memory indexes of projects' notes (`store::lexical`, the ranker SQLite's
//! index uses too), checked against the project's write version on every leg.
//!
//! A leg reads the project's write version (one indexed row; migration 0018's triggers move it in
//! every writing transaction, on any instance). An index read at that version ranks in memory; any
//! other version reads the project's notes again first (one statement, the project's rows in
//! write order). A project with no counter row, or too big to hold, is ranked by `ts_rank` in the
//! database. The version reads of concurrent legs go
//! to the server together, one statement per batch (`store::batch`): a read sent later than the
//! leg asked is never older than one sent at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use sqlx::PgPool;
use tokio::sync::watch;

use super::held::Held as HeldConns;
use super::ranking::read_index;
use crate::store::StoreResult;
use crate::store::batch::Batcher;
use crate::store::lexical::LexIndex;
use crate::store::vectors::SharedVectors;

/// (user id, project id).
type Project = (String, String);

/// One project's version.
const VERSION_ONE: &str =
    "SELECT version FROM note_counters WHERE user_id = $1 AND project_id = $2";

/// Several projects' versions, by position in the batch (1-based); no row without a counter.
const VERSION_MANY: &str = "SELECT k.i, c.version
     FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(user_id, project_id, i)
     JOIN note_counters c ON c.user_id = k.user_id AND c.project_id = k.project_id";

async fn versions(held: &HeldConns, projects: Vec<Project>) -> StoreResult<Vec<Option<i64>>> {
    if let [(user_id, project_id)] = projects.as_slice() {
        let version = held
            .run(|conn| {
                let (user_id, project_id) = (user_id.clone(), project_id.clone());
                async move {
                    sqlx::query_scalar(VERSION_ONE)
                        .bind(user_id)
                        .bind(project_id)
                        .fetch_optional(conn)
                        .await
                }
                .boxed()
            })
            .await?;
        return Ok(vec![version]);
    }
    let (users, project_ids): (Vec<String>, Vec<String>) = projects.into_iter().unzip();
    let rows: Vec<(i64, i64)> = held
        .run(|conn| {
            let (users, project_ids) = (users.clone(), project_ids.clone());
            async move {
                sqlx::query_as(VERSION_MANY)
                    .bind(users)
                    .bind(project_ids)
                    .fetch_all(conn)
                    .await
            }
            .boxed()
        })
        .await?;
    let mut found = vec![None; users.len()];
    for (i, version) in rows {
        if let Some(slot) = usize::try_from(i - 1).ok().and_then(|i| found.get_mut(i)) {
            *slot = Some(version);
        }
    }
    Ok(found)
}

/// Notes kept in memory over all indexed projects; least recently used projects go first. A
/// project bigger than this is never indexed and is ranked by `ts_rank` in the database.
const MAX_INDEXED_NOTES: usize = 250_000;

/// One project's index at the write version it was read at.
struct Indexed {
    version: i64,
    /// `None`: the project was too big to index at this version.
    lex: Option<Arc<LexIndex>>,
    /// The project's note vectors, kept from one index of the project to the next.
    vectors: SharedVectors,
}

#[derive(Default)]
struct Projects {
    slots: HashMap<Project, (Indexed, u64)>,
    clock: u64,
    notes: usize,
}

impl Projects {
    fn remove(&mut self, key: &Project) {
        if let Some((old, _)) = self.slots.remove(key) {
            self.notes = self.notes.saturating_sub(notes_of(&old));
        }
    }
}

fn notes_of(ix: &Indexed) -> usize {
    ix.lex.as_ref().map_or(0, |l| l.note_count())
}

/// What is held for a project at the version a leg read.
pub enum Held {
    Ready(Arc<LexIndex>),
    /// Too big to index: rank in the database.
    TooBig,
    Stale,
}

/// The indexes of one store, and its batched version reads.
pub struct InjectionCache {
    projects: Mutex<Projects>,
    /// Reads under way, each telling its waiters when it is done.
    building: Mutex<HashMap<Project, watch::Receiver<bool>>>,
    versions: Batcher<Project, Option<i64>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl InjectionCache {
    /// Starts the version reads' batch task on `held`'s connections.
    pub fn new(held: &Arc<HeldConns>) -> Self {
        let held = held.clone();
        Self {
            projects: Mutex::new(Projects::default()),
            building: Mutex::new(HashMap::new()),
            versions: Batcher::spawn_direct(move |projects| {
                let held = held.clone();
                async move { versions(&held, projects).await }
            }),
        }
    }

    /// The project's write version now; `None` when it has no counter row.
    pub async fn version(&self, user_id: &str, project_id: &str) -> StoreResult<Option<i64>> {
        self.versions
            .submit((user_id.to_owned(), project_id.to_owned()))
            .await
    }

    /// The index of (user, project) if it was read at `version`.
    pub fn get(&self, user_id: &str, project_id: &str, version: i64) -> Held {
        let mut p = lock(&self.projects);
        p.clock += 1;
        let now = p.clock;
        match p
            .slots
            .get_mut(&(user_id.to_owned(), project_id.to_owned()))
        {
            Some((ix, used)) if ix.version == version => {
                *used = now;
                match &ix.lex {
                    Some(lex) => Held::Ready(lex.clone()),
                    None => Held::TooBig,
                }
            }
            _ => Held::Stale,
        }
    }

    /// The vectors held beside (user, project)'s index, if one is held.
    pub fn vectors(&self, user_id: &str, project_id: &str) -> Option<SharedVectors> {
        lock(&self.projects)
            .slots
            .get(&(user_id.to_owned(), project_id.to_owned()))
            .map(|(ix, _)| ix.vectors.clone())
    }

    /// Starts one background read of (user, project) into memory unless one is under way; the
    /// receiver turns `true` when it is done. The read goes on if the leg that started it stops
    /// waiting (its deadline), so the next legs find it.
    pub fn refresh(
        self: &Arc<Self>,
        pool: &PgPool,
        user_id: &str,
        project_id: &str,
    ) -> watch::Receiver<bool> {
        let key = (user_id.to_owned(), project_id.to_owned());
        let (tx, rx) = watch::channel(false);
        {
            let mut building = lock(&self.building);
            if let Some(under_way) = building.get(&key) {
                return under_way.clone();
            }
            building.insert(key.clone(), rx.clone());
        }
        let this = self.clone();
        let pool = pool.clone();
        tokio::spawn(async move {
            match read_index(&pool, &key.0, &key.1, MAX_INDEXED_NOTES).await {
                Ok(Some((version, lex))) => this.store(&key.0, &key.1, version, lex.map(Arc::new)),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "note index not read; injection ranks in the database")
                }
            }
            lock(&this.building).remove(&key);
            let _ = tx.send(true);
        });
        rx
    }

    /// Keeps what was read at `version` (`None`: too big), dropping the least recently used
    /// projects while over the bound.
    pub fn store(&self, user_id: &str, project_id: &str, version: i64, lex: Option<Arc<LexIndex>>) {
        let mut p = lock(&self.projects);
        let key = (user_id.to_owned(), project_id.to_owned());
        let vectors = p
            .slots
            .get(&key)
            .map(|(old, _)| old.vectors.clone())
            .unwrap_or_default();
        p.remove(&key);
        let slot = Indexed {
            version,
            lex,
            vectors,
        };
        while p.notes + notes_of(&slot) > MAX_INDEXED_NOTES {
            let Some(oldest) = p
                .slots
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            p.remove(&oldest);
        }
        p.clock += 1;
        let now = p.clock;
        p.notes += notes_of(&slot);
        p.slots.insert(key, (slot, now));
    }

    /// Drops every index of `user_id`, whose notes were all deleted: none of their text stays in
    /// this process. (Other instances never serve theirs again, as the versions moved, and drop
    /// them as they are evicted.)
    pub fn forget_user(&self, user_id: &str) {
        let mut p = lock(&self.projects);
        let theirs: Vec<Project> = p
            .slots
            .keys()
            .filter(|(user, _)| user == user_id)
            .cloned()
            .collect();
        for key in theirs {
            p.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::domain::{Author, MemType, NoteId};
    use crate::store::lexical::Row;

    fn lex(text: &str) -> Arc<LexIndex> {
        let note = crate::store::Note {
            id: NoteId::from_stored(format!("mem#u#p#{text}")),
            project_id: "p".into(),
            note: text.into(),
            author: Author::default(),
            mem_type: MemType::default(),
            created_at: 1.0,
        };
        Arc::new(
            LexIndex::build(vec![Row {
                order: 1,
                seq: 1,
                note,
            }])
            .unwrap(),
        )
    }

    fn cache() -> InjectionCache {
        // Never connected: these tests only fill and read the cache.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .unwrap();
        InjectionCache::new(&Arc::new(HeldConns::new(&pool)))
    }

    #[tokio::test]
    async fn an_index_is_served_only_at_its_version_and_forgetting_a_user_drops_only_theirs() {
        let c = cache();
        c.store("u1", "p", 7, Some(lex("migrations")));
        c.store("u2", "p", 3, Some(lex("deploy")));
        assert!(matches!(c.get("u1", "p", 7), Held::Ready(_)));
        assert!(
            matches!(c.get("u1", "p", 8), Held::Stale),
            "a newer version"
        );
        assert!(
            matches!(c.get("u1", "q", 7), Held::Stale),
            "another project"
        );
        c.store("u1", "big", 4, None);
        assert!(matches!(c.get("u1", "big", 4), Held::TooBig));
        c.forget_user("u1");
        assert!(matches!(c.get("u1", "p", 7), Held::Stale));
        assert!(matches!(c.get("u2", "p", 3), Held::Ready(_)));
    }
}
