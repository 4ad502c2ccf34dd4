//! What each instance injected, kept in memory and checked against the project's write version.
//!
//! On PostgreSQL the injection search (the fit probe, then `ts_rank` over the project's matching
//! notes) cost about 1 ms of the server's CPU per leg with 300 notes, and the legs of one agent
//! turn all ask it the same question. A leg now reads the project's write version (one indexed
//! row; migration 0018's triggers move it in every writing transaction, on any instance) and reuses
//! the notes ranked for the same question terms at that version; any other version searches again.
//! A project with no counter row is searched every time. The version reads of concurrent legs go
//! to the server together, one statement per batch (`store::batch`): a read sent later than the
//! leg asked is never older than one sent at once.

use std::sync::Arc;

use futures::FutureExt;

use super::held::Held;
use crate::store::batch::Batcher;
use crate::store::{InjectBudget, Note, StoreResult};

/// (user id, project id).
type Project = (String, String);

/// One project's version.
const VERSION_ONE: &str =
    "SELECT version FROM note_counters WHERE user_id = $1 AND project_id = $2";

/// Several projects' versions, by position in the batch (1-based); no row without a counter.
const VERSION_MANY: &str = "SELECT k.i, c.version
     FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(user_id, project_id, i)
     JOIN note_counters c ON c.user_id = k.user_id AND c.project_id = k.project_id";

async fn versions(held: &Held, projects: Vec<Project>) -> StoreResult<Vec<Option<i64>>> {
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

/// Rankings kept at most (each at most the budget's notes: with the default 6,000 characters,
/// about 12 MB when full); past it the least useful go.
const CAPACITY: usize = 2_048;

/// The question's terms and the budget decide the notes, within one project of one user.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    user_id: String,
    project_id: String,
    terms: Vec<String>,
    max_notes: usize,
    max_chars: usize,
}

struct Ranked {
    version: i64,
    notes: Vec<Note>,
}

/// The rankings of one store, and its batched version reads.
pub struct InjectionCache {
    entries: quick_cache::sync::Cache<Key, Arc<Ranked>>,
    versions: Batcher<Project, Option<i64>>,
}

/// Names one lookup: where its answer goes once searched.
#[derive(Debug)]
pub struct Lookup {
    key: Key,
    version: i64,
}

impl Lookup {
    /// The question's terms the lookup was made with, for the search that answers it.
    pub fn terms(&self) -> &[String] {
        &self.key.terms
    }
}

impl InjectionCache {
    /// Starts the version reads' batch task on `held`'s connections.
    pub fn new(held: &Arc<Held>) -> Self {
        let held = held.clone();
        Self {
            entries: quick_cache::sync::Cache::new(CAPACITY),
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

    /// The notes ranked for `terms` at `version`, or the `Lookup` to `fill` once searched.
    pub fn get(
        &self,
        user_id: &str,
        project_id: &str,
        terms: Vec<String>,
        budget: InjectBudget,
        version: i64,
    ) -> Result<Vec<Note>, Lookup> {
        let key = Key {
            user_id: user_id.to_owned(),
            project_id: project_id.to_owned(),
            terms,
            max_notes: budget.max_notes,
            max_chars: budget.max_chars,
        };
        match self.entries.get(&key) {
            Some(hit) if hit.version == version => Ok(hit.notes.clone()),
            _ => Err(Lookup { key, version }),
        }
    }

    /// Drops every ranking of `user_id`, whose notes were all deleted: none of their text stays in
    /// this process. (Other instances never serve theirs again, as the versions moved, and drop
    /// them as they are evicted.)
    pub fn forget_user(&self, user_id: &str) {
        self.entries.retain(|key, _| key.user_id != user_id);
    }

    /// Keeps what a search at the lookup's version answered. The search ran after the version was
    /// read, so it may already include a later write; that later write moved the version, so the
    /// entry is never served again.
    pub fn fill(&self, lookup: Lookup, notes: &[Note]) {
        self.entries.insert(
            lookup.key,
            Arc::new(Ranked {
                version: lookup.version,
                notes: notes.to_vec(),
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::domain::{Author, MemType, NoteId};

    const BUDGET: InjectBudget = InjectBudget {
        max_notes: 8,
        max_chars: 6_000,
    };

    fn note(text: &str) -> Note {
        Note {
            id: NoteId::from_stored(format!("mem#u#p#{text}")),
            project_id: "p".into(),
            note: text.into(),
            author: Author::default(),
            mem_type: MemType::default(),
            created_at: 1.0,
        }
    }

    fn terms(q: &str) -> Vec<String> {
        crate::store::relevance::query_terms(q)
    }

    fn cache() -> InjectionCache {
        // Never connected: these tests only fill and read the cache.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .unwrap();
        InjectionCache::new(&Arc::new(Held::new(&pool)))
    }

    #[tokio::test]
    async fn a_ranking_is_served_only_at_its_version_and_for_its_own_question() {
        let c = cache();
        let miss = c
            .get("u1", "p", terms("database migrations"), BUDGET, 7)
            .unwrap_err();
        c.fill(miss, &[note("migrations")]);
        let hit = c.get("u1", "p", terms("The database migrations?"), BUDGET, 7);
        assert_eq!(
            hit.unwrap()[0].note,
            "migrations",
            "the same terms, other words around"
        );
        assert!(
            c.get("u1", "p", terms("database migrations"), BUDGET, 8)
                .is_err(),
            "a newer version"
        );
        assert!(
            c.get("u1", "p", terms("deploy"), BUDGET, 7).is_err(),
            "another question"
        );
        assert!(
            c.get("u2", "p", terms("database migrations"), BUDGET, 7)
                .is_err(),
            "another user"
        );
        let smaller = InjectBudget {
            max_notes: 2,
            ..BUDGET
        };
        assert!(
            c.get("u1", "p", terms("database migrations"), smaller, 7)
                .is_err(),
            "another budget"
        );
    }

    #[tokio::test]
    async fn forgetting_a_user_drops_only_their_rankings() {
        let c = cache();
        for user in ["u1", "u2"] {
            let miss = c.get(user, "p", terms("deploy"), BUDGET, 3).unwrap_err();
            c.fill(miss, &[note(user)]);
        }
        c.forget_user("u1");
        assert!(c.get("u1", "p", terms("deploy"), BUDGET, 3).is_err());
        assert_eq!(
            c.get("u2", "p", terms("deploy"), BUDGET, 3).unwrap()[0].note,
            "u2"
        );
    }
}
