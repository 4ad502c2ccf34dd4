//! One storage conformance suite, run against every backend: each scenario is written once against
//! the `AuthStore` and `MemoryStore` traits and called for SQLite (a temporary file) and PostgreSQL
//! (a fresh database on the test server), so both backends keep the same contract.
//!
//! Scenarios sit by area: accounts, sessions, quota and the waitlist (`accounts`); remembering,
//! listing and deleting notes (`notes`); the full-text index and injection (`ranking`); opening and
//! migrating (`migrations`); group commit of the leg's writes across two instances (`batching`);
//! the usage ledger's batches, month counts and reservations (`usage`).
//! This file holds the fixture and the helpers they share.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "../support/pg.rs"]
mod pg;

use std::time::Duration;

use relay_server::domain::{Author, Email, MemType, NoteText, ProjectId, Role};
use relay_server::store::{Backend, NewNote, NewUser, Opener, StoreOptions};

const OPTIONS: StoreOptions = StoreOptions {
    max_connections: 8,
    busy_timeout: Duration::from_secs(5),
};

/// An opened backend and what keeps its storage alive; `inspect` reads tables directly.
struct Fixture {
    store: Backend,
    inspect: Inspect,
    _dir: Option<tempfile::TempDir>,
    _db: Option<pg::TestDb>,
}

/// Direct access to the backend's tables, for what the traits do not expose (leftover rows).
enum Inspect {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Fixture {
    async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("relay.db").display());
        let store = Opener::default()
            .open(&url, "memory.url", &OPTIONS)
            .await
            .unwrap();
        let inspect = Inspect::Sqlite(sqlx::SqlitePool::connect(&url).await.unwrap());
        Self {
            store,
            inspect,
            _dir: Some(dir),
            _db: None,
        }
    }

    async fn postgres() -> Self {
        let db = pg::TestDb::create().await;
        let store = Opener::default()
            .open(&db.url, "memory.url", &OPTIONS)
            .await
            .unwrap();
        let inspect = Inspect::Postgres(sqlx::PgPool::connect(&db.url).await.unwrap());
        Self {
            store,
            inspect,
            _dir: None,
            _db: Some(db),
        }
    }

    /// Rows in `table` whose `user_id` is `user`.
    async fn rows_of(&self, table: &str, user: &str) -> i64 {
        let sql = match table {
            "notes" => "notes",
            "note_counters" => "note_counters",
            other => panic!("no table {other}"),
        };
        match &self.inspect {
            Inspect::Sqlite(p) => sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {sql} WHERE user_id = ?"
            )))
            .bind(user)
            .fetch_one(p)
            .await
            .unwrap(),
            Inspect::Postgres(p) => sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {sql} WHERE user_id = $1"
            )))
            .bind(user)
            .fetch_one(p)
            .await
            .unwrap(),
        }
    }

    /// Full-text index entries: (all of them, those whose note is gone, those matching `word`).
    async fn index_rows(&self, word: &str) -> (i64, i64, i64) {
        match &self.inspect {
            Inspect::Sqlite(p) => {
                let all = sqlx::query_scalar("SELECT count(*) FROM notes_fts")
                    .fetch_one(p)
                    .await
                    .unwrap();
                let orphans = sqlx::query_scalar(
                    "SELECT count(*) FROM notes_fts WHERE rowid NOT IN (SELECT pk FROM notes)",
                )
                .fetch_one(p)
                .await
                .unwrap();
                let hits = sqlx::query_scalar(
                    "SELECT count(*) FROM notes_fts WHERE notes_fts MATCH 'note : ' || ?",
                )
                .bind(word)
                .fetch_one(p)
                .await
                .unwrap();
                (all, orphans, hits)
            }
            // The vector is a generated column of `notes`: it cannot outlive its note.
            Inspect::Postgres(p) => {
                let (all, hits) = sqlx::query_as(
                    "SELECT count(search), count(*) FILTER (WHERE search @@ plainto_tsquery('english', $1))
                     FROM notes",
                )
                .bind(word)
                .fetch_one(p)
                .await
                .unwrap();
                (all, 0, hits)
            }
        }
    }

    /// Runs `sql` on a connection of its own, as another process would.
    async fn execute(&self, sql: &str) {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match &self.inspect {
            Inspect::Sqlite(p) => {
                sqlx::query(sql).execute(p).await.unwrap();
            }
            Inspect::Postgres(p) => {
                sqlx::query(sql).execute(p).await.unwrap();
            }
        }
    }

    /// Removes a session the way no Relay path does: without the trigger that tells the caches.
    /// Only a lookup the cache answers still finds it afterwards.
    async fn delete_session_unannounced(&self, token_hash: &str) {
        let (off, on) = match &self.inspect {
            Inspect::Sqlite(_) => (
                "DROP TRIGGER auth_version_session_deleted",
                "CREATE TRIGGER auth_version_session_deleted AFTER DELETE ON sessions
                 BEGIN UPDATE auth_version SET version = version + 1 WHERE id = 1; END",
            ),
            Inspect::Postgres(_) => (
                "ALTER TABLE sessions DISABLE TRIGGER relay_auth_session_deleted",
                "ALTER TABLE sessions ENABLE TRIGGER relay_auth_session_deleted",
            ),
        };
        self.execute(off).await;
        self.execute(&format!(
            "DELETE FROM sessions WHERE token_hash = '{token_hash}'"
        ))
        .await;
        self.execute(on).await;
    }

    async fn waitlist(&self) -> Vec<(String, String)> {
        let sql = "SELECT email, source FROM waitlist ORDER BY email";
        match &self.inspect {
            Inspect::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
            Inspect::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
        }
    }
}

/// Runs every scenario named on both backends, as `AREA::sqlite::NAME` and `AREA::postgres::NAME`.
macro_rules! conformance {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    super::$scenario(&crate::Fixture::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    super::$scenario(&crate::Fixture::postgres().await).await;
                }
            )*
        }
    };
}

mod accounts;
mod batching;
mod migrations;
mod notes;
mod ranking;
mod usage;

/// Opens every pooled connection first: a race is only a race when no writer waits for a new
/// connection while another finishes.
async fn warm_up(f: &Fixture) {
    let calls: Vec<_> = (0..2 * OPTIONS.max_connections)
        .map(|_| {
            let mem = f.store.memory.clone();
            tokio::spawn(async move { mem.recall("nobody", "warm", 1).await.unwrap() })
        })
        .collect();
    for c in calls {
        c.await.unwrap();
    }
}

fn new_user(id: &str, email: &str, role: Role, limit: i64, created_at: f64) -> NewUser {
    NewUser {
        id: id.into(),
        email: Email::parse(email).unwrap(),
        password_hash: format!("$argon2id$fake${id}"),
        role,
        limit,
        created_at,
    }
}

/// A note id as a request would carry it.
fn note_id(id: &str) -> relay_server::domain::NoteId {
    relay_server::domain::NoteId::parse(id).unwrap()
}

fn note(user: &str, project: &str, text: &str, created_at: f64) -> NewNote {
    NewNote {
        user_id: user.into(),
        project_id: ProjectId::parse(project).unwrap(),
        text: NoteText::parse(text, "note").unwrap(),
        author: Author::default(),
        mem_type: MemType::default(),
        created_at,
    }
}
