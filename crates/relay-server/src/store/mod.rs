//! Storage: the traits handlers use, and the backend chosen by the URL scheme.
//!
//! Handlers see only `Arc<dyn AuthStore>` and `Arc<dyn MemoryStore>`; each backend lives in its own
//! module with its own migrations, so a new backend adds a module and touches no handler.

pub mod auth_cache;
mod batch;
pub mod lexical;
mod open;
pub mod postgres;
pub mod relevance;
mod rows;
pub mod signin;
pub mod sqlite;
mod text;
pub mod usage;
mod usage_rows;
pub mod vectors;

pub use open::Stores;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{Author, Email, MemType, NoteId, NoteText, ProjectId, Role};

/// What can go wrong in a store, in the terms handlers act on.
///
/// `Clone` so that a failed batch gives each of its callers the same error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was broken (an email already registered).
    #[error("conflict: {0}")]
    Conflict(&'static str),
    /// The store cannot be reached or is locked or full; the caller may retry later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store cannot hold a value the request carried (PostgreSQL refuses a NUL character in
    /// text): the request's fault, a 400.
    #[error("value the store cannot hold: {0}")]
    Unstorable(String),
    /// Anything else: a bug or corrupt data. Logged, never shown.
    #[error("store error: {0}")]
    Internal(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Database(db) if db.is_unique_violation() => Self::Conflict("unique"),
            // Each database names its errors its own way: PostgreSQL's SQLSTATE codes are read by
            // its backend; another database's errors count as unavailable, as the catch-all does.
            sqlx::Error::Database(db) => postgres::classify(db.as_ref(), e.to_string())
                .unwrap_or_else(|| Self::Unavailable(e.to_string())),
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::ColumnIndexOutOfBounds { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::TypeNotFound { .. }
            | sqlx::Error::Encode(_)
            | sqlx::Error::RowNotFound
            | sqlx::Error::Migrate(_) => Self::Internal(e.to_string()),
            // Connection, pool, I/O, lock and disk failures: the store is (for now) unavailable.
            _ => Self::Unavailable(e.to_string()),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// An account as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub id: String,
    pub email: String,
    pub role: Role,
    /// Quota; -1 is unlimited.
    pub limit: i64,
    pub used: i64,
    pub created_at: f64,
    /// The configured models the account may use; `None` for every one.
    pub allowed_models: Option<Vec<String>>,
}

impl User {
    /// Whether the account may use the configured model `name`.
    pub fn may_use(&self, name: &str) -> bool {
        self.allowed_models
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == name))
    }

    /// Admins and accounts with limit -1 are unlimited.
    pub fn unlimited(&self) -> bool {
        self.role == Role::Admin || self.limit < 0
    }

    pub fn effective_limit(&self) -> i64 {
        if self.unlimited() { -1 } else { self.limit }
    }

    pub fn remaining(&self) -> i64 {
        if self.unlimited() {
            -1
        } else {
            (self.limit - self.used).max(0)
        }
    }
}

/// A new account.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub id: String,
    pub email: Email,
    pub password_hash: String,
    pub role: Role,
    pub limit: i64,
    pub created_at: f64,
}

/// What `relay users set` may change.
#[derive(Debug, Clone, Default)]
pub struct UserChanges {
    pub role: Option<Role>,
    pub limit: Option<i64>,
    pub reset_usage: bool,
    /// `Some(None)` lets the account use every model again.
    pub allowed_models: Option<Option<Vec<String>>>,
}

/// The outcome of asking for one quota unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    QuotaExceeded,
}

/// Accounts, sessions, quota and the waitlist.
#[async_trait]
pub trait AuthStore: Send + Sync {
    /// Creates the account; `Conflict` when the email is taken.
    async fn create_user(&self, user: NewUser) -> StoreResult<User>;
    /// The account and its password hash.
    async fn user_by_email(&self, email: &str) -> StoreResult<Option<(User, String)>>;
    async fn list_users(&self) -> StoreResult<Vec<User>>;
    /// One page of accounts in the order `list_users` gives, and how many there are in all.
    async fn list_users_page(&self, limit: u32, offset: u64) -> StoreResult<(u64, Vec<User>)>;
    async fn update_user(&self, email: &str, changes: UserChanges) -> StoreResult<Option<User>>;
    /// Removes the account and its sessions; the caller removes notes from the memory store.
    async fn delete_user(&self, email: &str) -> StoreResult<Option<User>>;

    async fn create_session(
        &self,
        token_hash: &str,
        user_id: &str,
        now: f64,
        expires_at: f64,
    ) -> StoreResult<()>;
    /// The account behind an unexpired session, and when the session expires.
    async fn session(&self, token_hash: &str, now: f64) -> StoreResult<Option<(User, f64)>>;
    /// The account behind an unexpired session; a cache in front may answer (`auth_cache`).
    async fn session_user(&self, token_hash: &str, now: f64) -> StoreResult<Option<User>> {
        Ok(self.session(token_hash, now).await?.map(|(user, _)| user))
    }
    /// As `session_user`, but read from the store itself even where a cache is in front: for
    /// answers that show `used`, which every leg changes.
    async fn session_user_fresh(&self, token_hash: &str, now: f64) -> StoreResult<Option<User>> {
        self.session_user(token_hash, now).await
    }
    async fn delete_session(&self, token_hash: &str) -> StoreResult<()>;

    /// Takes one quota unit in one atomic statement: no leg is admitted past the limit.
    async fn admit_leg(&self, user_id: &str) -> StoreResult<Admission>;
    /// Gives back a unit taken by `admit_leg`.
    async fn refund_leg(&self, user_id: &str) -> StoreResult<()>;
    /// Sets `used` back to 0 for every account whose count belongs to a month (`YYYYMM`) before
    /// `month`, which it then belongs to (`[auth] quota_period = "month"`); how many changed.
    async fn roll_quota_month(&self, month: i64) -> StoreResult<u64>;
    /// Records that an operator lifted the account's sign-in lock at `now`: failures before it
    /// stop counting (`limits::signin`). False when there is no such account.
    async fn unlock_signin(&self, email: &str, now: f64) -> StoreResult<bool>;
    /// When an operator last lifted the account's sign-in lock, if ever.
    async fn signin_unlocked_at(&self, email: &str) -> StoreResult<Option<f64>>;

    /// Idempotent: a repeated email changes nothing and is not reported.
    async fn add_to_waitlist(&self, email: &str, source: &str, now: f64) -> StoreResult<()>;

    /// A cheap round trip for readiness.
    async fn ping(&self) -> StoreResult<()>;

    /// The process is about to exit (see `MemoryStore::close`).
    async fn close(&self) {}
}

/// A note as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub id: NoteId,
    pub project_id: String,
    pub note: String,
    pub author: Author,
    pub mem_type: MemType,
    pub created_at: f64,
}

impl From<Note> for relay_wire::memory::MemoryNote {
    fn from(n: Note) -> Self {
        Self {
            id: n.id.into_string(),
            project_id: n.project_id,
            note: n.note,
            author: n.author.into_string(),
            created_at: n.created_at,
            pinned: false,
            mem_type: n.mem_type.into_string(),
        }
    }
}

/// A note to remember.
#[derive(Debug, Clone)]
pub struct NewNote {
    pub user_id: String,
    pub project_id: ProjectId,
    pub text: NoteText,
    pub author: Author,
    pub mem_type: MemType,
    pub created_at: f64,
}

/// The outcome of `remember`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    pub id: NoteId,
    /// False when an equal note (whitespace folded) was already in the project.
    pub created: bool,
}

/// How much of a project one agent leg may inject.
#[derive(Debug, Clone, Copy)]
pub struct InjectBudget {
    pub max_notes: usize,
    pub max_chars: usize,
}

/// Project memory (notes) and open-mode usage.
///
/// Every write path keeps the full-text index in step with the notes in the same transaction.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Stores a note under the next id of (user, project), unless an equal note is there.
    async fn remember(&self, note: NewNote) -> StoreResult<Remembered>;
    /// The newest `limit` note texts of a project, oldest first.
    async fn recall(&self, user_id: &str, project_id: &str, limit: u32)
    -> StoreResult<Vec<String>>;
    /// One page of the caller's notes (one project or all), oldest first, ties by id; and the total.
    async fn list_notes(
        &self,
        user_id: &str,
        project_id: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(u64, Vec<Note>)>;
    /// Deletes one note of the user; 0 when there is none with that id (or it is another user's).
    async fn delete_note(&self, user_id: &str, id: &NoteId) -> StoreResult<u64>;
    /// Deletes one project's notes of the user.
    async fn delete_project(&self, user_id: &str, project_id: &str) -> StoreResult<u64>;
    /// One note of the user; `None` when the user has no note with that id.
    async fn get_note(&self, user_id: &str, id: &NoteId) -> StoreResult<Option<Note>>;
    /// Replaces a note's text; `None` when the user has no note with that id.
    async fn edit_note(
        &self,
        user_id: &str,
        id: &NoteId,
        text: &NoteText,
    ) -> StoreResult<Option<Note>>;
    /// The notes to inject into an agent leg: the whole project, oldest first, when it fits the
    /// budget; otherwise the notes most relevant to `query` (ties to the newest) that clear the
    /// relevance floor, best first; none when nothing matches.
    async fn notes_for_injection(
        &self,
        user_id: &str,
        project_id: &str,
        query: &str,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>>;
    /// As `notes_for_injection`, with the question's embedding fused into the ranking (issue 44)
    /// where the store holds the project's notes in memory; otherwise exactly
    /// `notes_for_injection`.
    async fn notes_for_injection_near(
        &self,
        user_id: &str,
        project_id: &str,
        query: &str,
        _near: &vectors::QueryVector,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        self.notes_for_injection(user_id, project_id, query, budget)
            .await
    }
    /// Up to `limit` notes of any user with no vector of `model` (none yet, or one of another
    /// model), newest first.
    async fn notes_to_embed(
        &self,
        _model: &str,
        _limit: u32,
    ) -> StoreResult<Vec<vectors::ToEmbed>> {
        Ok(Vec::new())
    }
    /// Keeps each note's vector of `model`, replacing any other. A note deleted, or edited to
    /// another text, since it was read gets none.
    async fn put_vectors(
        &self,
        _model: &str,
        _vectors: Vec<(vectors::ToEmbed, vectors::Quantised)>,
    ) -> StoreResult<()> {
        Ok(())
    }
    /// Counts one leg served in open mode (no accounts), for `GET /v1/me`.
    async fn count_open_leg(&self) -> StoreResult<()>;
    /// Legs served in open mode.
    async fn open_legs(&self) -> StoreResult<i64>;

    /// The GDPR cascade: every note of the user in every project and everything derived from them
    /// (index rows), in one transaction. Returns how many notes went. The per-project id counters
    /// stay: they hold no note text, and an id is never reused.
    async fn delete_all_notes(&self, user_id: &str) -> StoreResult<u64>;

    /// Drops the user's id counters: only when the account itself is deleted, whose id is never
    /// issued again.
    async fn forget_counters(&self, user_id: &str) -> StoreResult<()>;

    /// A cheap round trip for readiness.
    async fn ping(&self) -> StoreResult<()>;

    /// The process is about to exit: leave the store so that the next start opens it quickly.
    /// SQLite moves its write-ahead log into the database file and empties it; a server database
    /// has nothing to do.
    async fn close(&self) {}
}

/// Connection settings shared by every backend.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub max_connections: u32,
    pub busy_timeout: Duration,
}

/// One opened backend; it serves as both stores when both URLs name it.
#[derive(Clone)]
pub struct Backend {
    pub auth: Arc<dyn AuthStore>,
    pub memory: Arc<dyn MemoryStore>,
    /// The usage ledger, in the memory store's database.
    pub usage: Arc<dyn usage::UsageStore>,
    /// Agents' sign-in (device codes, refresh tokens, API keys), beside the accounts.
    pub signin: Arc<dyn signin::SignInStore>,
}

/// The backend a URL's scheme names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Sqlite,
    Postgres,
}

impl Scheme {
    /// `key` names the setting in the error message.
    pub fn of(url: &str, key: &str) -> Result<Self, String> {
        let scheme = url.split(':').next().unwrap_or_default();
        match scheme {
            "sqlite" => Ok(Self::Sqlite),
            "postgres" | "postgresql" => Ok(Self::Postgres),
            other => Err(format!(
                "{key}: unknown store scheme `{other}`; use sqlite://PATH or postgres://USER@HOST/DB"
            )),
        }
    }
}

/// Opens stores by URL, once per distinct URL, running migrations on first open.
#[derive(Default)]
pub struct Opener {
    opened: HashMap<String, Backend>,
}

impl Opener {
    pub async fn open(
        &mut self,
        url: &str,
        key: &str,
        options: &StoreOptions,
    ) -> anyhow::Result<Backend> {
        if let Some(b) = self.opened.get(url) {
            return Ok(b.clone());
        }
        let backend = match Scheme::of(url, key).map_err(anyhow::Error::msg)? {
            Scheme::Sqlite => {
                let store = Arc::new(sqlite::SqliteStore::open(url, options).await?);
                Backend {
                    auth: auth_cache::over_sqlite(url, store.clone())?,
                    usage: store.clone(),
                    signin: store.clone(),
                    memory: store,
                }
            }
            Scheme::Postgres => {
                let store = Arc::new(postgres::PgStore::open(url, options).await?);
                Backend {
                    auth: auth_cache::over_postgres(url, store.held(), store.clone())?,
                    usage: store.clone(),
                    signin: store.clone(),
                    memory: store,
                }
            }
        };
        self.opened.insert(url.to_owned(), backend.clone());
        Ok(backend)
    }
}
