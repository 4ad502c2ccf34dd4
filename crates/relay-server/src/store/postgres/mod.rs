//! The PostgreSQL backend: one database shared by any number of Relay instances.
//!
//! Every rule that must hold across instances is enforced by PostgreSQL itself, never by process
//! memory: quota admission is one conditional `UPDATE`; note ids come from a counter row whose lock
//! serialises writers of a project; sessions are cached per instance only while a listener hears
//! every change to them (`store::auth_cache`); migrations run under the advisory lock sqlx's
//! PostgreSQL migrator takes (`pg_advisory_lock` in `sqlx-postgres/src/migrate.rs`,
//! `Migrate::lock`), so instances that start together migrate once.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};

use super::{
    Admission, AuthStore, InjectBudget, MemoryStore, NewNote, NewUser, Note, Remembered,
    StoreError, StoreOptions, StoreResult, User, UserChanges, note_id, relevance,
};
use crate::domain::{NoteText, Role};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("src/store/postgres/migrations");

pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// The project's notes most relevant to `query` by ts_rank, within `budget`; ranked among the
    /// newest `CANDIDATE_WINDOW` matches, as the SQLite backend does.
    async fn rank_notes(
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
        // Each term is its own plainto_tsquery (stemmed like the notes, stopwords dropped) and the
        // terms are ORed by the migration's aggregate: user text is bound as data and never parsed
        // as tsquery syntax. ts_rank with normalisation 1 divides by the log of the note's length,
        // as bm25 discounts long notes in the SQLite backend; ties go to the newest.
        let rows = sqlx::query(
            "SELECT w.id, w.project_id, w.note, w.author, w.mem_type, w.created_at,
                    ts_rank(w.search, w.query, 1)::float8 AS score
             FROM (SELECT n.id, n.project_id, n.note, n.author, n.mem_type, n.created_at, n.seq,
                          n.search, q.query
                   FROM notes n,
                        (SELECT relay_tsquery_or(plainto_tsquery('english', term)) AS query
                         FROM unnest($3::text[]) AS term) AS q
                   WHERE n.user_id = $1 AND n.project_id = $2 AND n.search @@ q.query
                   ORDER BY n.created_at DESC, n.seq DESC
                   LIMIT $4) AS w
             ORDER BY score DESC, w.created_at DESC, w.seq DESC
             LIMIT $5",
        )
        .bind(user_id)
        .bind(project_id)
        .bind(&terms)
        .bind(relevance::CANDIDATE_WINDOW)
        .bind(relevance::ranked_rows(budget))
        .fetch_all(&self.pool)
        .await?;
        let ranked = rows
            .iter()
            .map(|r| Ok((note_from_row(r)?, r.try_get::<f64, _>("score")?)))
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(relevance::select(ranked, budget))
    }

    /// Connects and migrates. A server that cannot be reached yet (down, starting, unreachable)
    /// does not stop start-up: the pool connects lazily, the store answers `Unavailable` (503)
    /// until the server is up, and the first connection made then migrates before any query runs,
    /// so the instance serves by itself without a restart. A server that answers but refuses
    /// (wrong password, no such database, a failed migration) still stops start-up.
    pub async fn open(url: &str, options: &StoreOptions) -> anyhow::Result<Self> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("cannot parse PostgreSQL URL: {e}"))?
            .application_name("relay");
        // Named without the user or password: this goes to the log.
        let target = format!(
            "{}:{}/{}",
            connect.get_host(),
            connect.get_port(),
            connect.get_database().unwrap_or_default()
        );
        let migrated = Arc::new(AtomicBool::new(false));
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            // A request waits this long for a connection; past it the store counts as unavailable
            // and the handler answers 503 instead of hanging while the server is down.
            .acquire_timeout(options.busy_timeout)
            // Connections the server dropped (a restart, a failover) are found and replaced before
            // a request gets them, so service resumes by itself when the server is back.
            .test_before_acquire(true)
            .after_connect({
                let migrated = migrated.clone();
                move |conn, _meta| {
                    let migrated = migrated.clone();
                    Box::pin(async move {
                        if !migrated.load(Ordering::Acquire) {
                            // Under the migrator's advisory lock: concurrent first connections
                            // (and other instances) apply each migration once. `run_direct` is
                            // what `run` calls; `run` itself cannot take the callback's borrowed
                            // connection ("Acquire is not general enough").
                            MIGRATOR
                                .run_direct(None, conn, false)
                                .await
                                .map_err(|e| match e {
                                    sqlx::migrate::MigrateError::Execute(inner) => inner,
                                    other => sqlx::Error::Migrate(Box::new(other)),
                                })?;
                            migrated.store(true, Ordering::Release);
                        }
                        Ok(())
                    })
                }
            })
            .connect_lazy_with(connect);
        match pool.acquire().await {
            Ok(_) => {}
            // Said plainly: a refused certificate is a configuration problem, not an outage, so it
            // stops start-up. sqlx reports a handshake the verifier refused as an I/O error
            // carrying rustls' text.
            Err(e) if matches!(e, sqlx::Error::Tls(_)) || e.to_string().contains("certificate") => {
                anyhow::bail!(
                    "cannot connect to PostgreSQL at {target}: TLS failed ({e}); check sslmode and sslrootcert in the URL"
                )
            }
            Err(e) => match StoreError::from(e) {
                StoreError::Unavailable(why) => tracing::warn!(
                    store = %target,
                    error = %why,
                    "PostgreSQL is unreachable; starting anyway: its endpoints answer 503 until it is up, then it is migrated and used without a restart"
                ),
                other => anyhow::bail!("cannot open PostgreSQL database {target}: {other}"),
            },
        }
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// The columns `user_from_row` reads, spliced into queries at compile time.
macro_rules! user_columns {
    () => {
        "id, email, role, quota_limit, used, created_at"
    };
}

fn user_from_row(row: &PgRow) -> StoreResult<User> {
    let role: String = row.try_get("role")?;
    Ok(User {
        id: row.try_get("id")?,
        email: row.try_get("email")?,
        role: Role::parse(&role).map_err(StoreError::Internal)?,
        limit: row.try_get("quota_limit")?,
        used: row.try_get("used")?,
        created_at: row.try_get("created_at")?,
    })
}

#[async_trait]
impl AuthStore for PgStore {
    async fn create_user(&self, user: NewUser) -> StoreResult<User> {
        sqlx::query(
            "INSERT INTO users (id, email, password_hash, role, quota_limit, used, created_at)
             VALUES ($1, $2, $3, $4, $5, 0, $6)",
        )
        .bind(&user.id)
        .bind(user.email.as_str())
        .bind(&user.password_hash)
        .bind(user.role.as_str())
        .bind(user.limit)
        .bind(user.created_at)
        .execute(&self.pool)
        .await?;
        Ok(User {
            id: user.id,
            email: user.email.as_str().to_owned(),
            role: user.role,
            limit: user.limit,
            used: 0,
            created_at: user.created_at,
        })
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<(User, String)>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            user_columns!(),
            ", password_hash FROM users WHERE email = $1"
        ))
        .bind(email)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok((user_from_row(&r)?, r.try_get("password_hash")?)))
            .transpose()
    }

    async fn list_users(&self) -> StoreResult<Vec<User>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            user_columns!(),
            " FROM users ORDER BY created_at, email"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(user_from_row).collect()
    }

    async fn list_users_page(&self, limit: u32, offset: u64) -> StoreResult<(u64, Vec<User>)> {
        let total: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
            .fetch_one(&self.pool)
            .await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            user_columns!(),
            " FROM users ORDER BY created_at, email LIMIT $1 OFFSET $2"
        ))
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        let users = rows.iter().map(user_from_row).collect::<StoreResult<_>>()?;
        Ok((total.unsigned_abs(), users))
    }

    async fn update_user(&self, email: &str, changes: UserChanges) -> StoreResult<Option<User>> {
        let row = sqlx::query(concat!(
            "UPDATE users SET
                role = COALESCE($1, role),
                quota_limit = COALESCE($2, quota_limit),
                used = CASE WHEN $3 THEN 0 ELSE used END
             WHERE email = $4
             RETURNING ",
            user_columns!()
        ))
        .bind(changes.role.map(Role::as_str))
        .bind(changes.limit)
        .bind(changes.reset_usage)
        .bind(email)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    async fn delete_user(&self, email: &str) -> StoreResult<Option<User>> {
        // Sessions go with the account through ON DELETE CASCADE.
        let row = sqlx::query(concat!(
            "DELETE FROM users WHERE email = $1 RETURNING ",
            user_columns!()
        ))
        .bind(email)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    async fn create_session(
        &self,
        token_hash: &str,
        user_id: &str,
        now: f64,
        expires_at: f64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO sessions (token_hash, user_id, created_at, expires_at)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(token_hash)
        .bind(user_id)
        .bind(now)
        .bind(expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn session(&self, token_hash: &str, now: f64) -> StoreResult<Option<(User, f64)>> {
        // Cached per instance in front (`auth_cache`); every change that must end a cached session
        // notifies (migration 0017), so a signout on any instance ends the session everywhere.
        let row = sqlx::query(
            "SELECT u.id, u.email, u.role, u.quota_limit, u.used, u.created_at, s.expires_at
             FROM sessions s JOIN users u ON u.id = s.user_id
             WHERE s.token_hash = $1 AND s.expires_at > $2",
        )
        .bind(token_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok((user_from_row(&r)?, r.try_get("expires_at")?)))
            .transpose()
    }

    async fn delete_session(&self, token_hash: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM sessions WHERE token_hash = $1")
            .bind(token_hash)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn admit_leg(&self, user_id: &str) -> StoreResult<Admission> {
        // Check and increment in one statement. Concurrent updates of the row queue on its lock,
        // and under READ COMMITTED PostgreSQL re-checks the WHERE clause against the row the
        // previous writer committed, so the last unit goes to exactly one leg whichever instance
        // it came through.
        let done = sqlx::query(
            "UPDATE users SET used = used + 1
             WHERE id = $1 AND (role = 'admin' OR quota_limit < 0 OR used < quota_limit)",
        )
        .bind(user_id)
        .execute(&self.pool)
        .await?;
        Ok(if done.rows_affected() == 1 {
            Admission::Admitted
        } else {
            Admission::QuotaExceeded
        })
    }

    async fn refund_leg(&self, user_id: &str) -> StoreResult<()> {
        sqlx::query("UPDATE users SET used = used - 1 WHERE id = $1 AND used > 0")
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn add_to_waitlist(&self, email: &str, source: &str, now: f64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO waitlist (email, source, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (email) DO NOTHING",
        )
        .bind(email)
        .bind(source)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        // A real round trip, and readiness means "can take a write": a server that failed over to
        // a read-only standby answers queries, yet every remember and every admission would fail.
        let writable: bool = sqlx::query_scalar("SELECT NOT pg_is_in_recovery()")
            .fetch_one(&self.pool)
            .await?;
        if writable {
            Ok(())
        } else {
            Err(StoreError::Unavailable(
                "the PostgreSQL server is a read-only standby".into(),
            ))
        }
    }
}

/// The columns `note_from_row` reads.
macro_rules! note_columns {
    () => {
        "id, project_id, note, author, mem_type, created_at"
    };
}

fn note_from_row(row: &PgRow) -> StoreResult<Note> {
    Ok(Note {
        id: row.try_get("id")?,
        project_id: row.try_get("project_id")?,
        note: row.try_get("note")?,
        author: row.try_get("author")?,
        mem_type: row.try_get("mem_type")?,
        created_at: row.try_get("created_at")?,
    })
}

fn norm_hash(folded: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(folded.as_bytes()))
}

#[async_trait]
impl MemoryStore for PgStore {
    async fn remember(&self, note: NewNote) -> StoreResult<Remembered> {
        let folded = note.text.folded();
        let hash = norm_hash(&folded);
        let project = note.project_id.as_str();
        let mut tx = self.pool.begin().await?;
        // The upsert comes first: it takes the counter row's lock, so every other remember into
        // this project, on any instance, waits here until this transaction ends. The duplicate
        // check below then sees every note committed before it, and two equal notes written at
        // once cannot both be stored. A duplicate rolls back, which also undoes the increment, so
        // the ids stay gap-free.
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO note_counters (user_id, project_id, last_seq) VALUES ($1, $2, 1)
             ON CONFLICT (user_id, project_id) DO UPDATE SET last_seq = note_counters.last_seq + 1
             RETURNING last_seq",
        )
        .bind(&note.user_id)
        .bind(project)
        .fetch_one(&mut *tx)
        .await?;
        let existing = sqlx::query(
            "SELECT id, note FROM notes WHERE user_id = $1 AND project_id = $2 AND norm_hash = $3",
        )
        .bind(&note.user_id)
        .bind(project)
        .bind(&hash)
        .fetch_all(&mut *tx)
        .await?;
        for row in &existing {
            let text: String = row.try_get("note")?;
            // The hash only narrows the search; equal folded text is what makes a duplicate.
            if text.split_whitespace().collect::<Vec<_>>().join(" ") == folded {
                tx.rollback().await?;
                return Ok(Remembered {
                    id: row.try_get("id")?,
                    created: false,
                });
            }
        }
        let id = note_id(&note.user_id, project, seq);
        sqlx::query(
            "INSERT INTO notes (id, user_id, project_id, seq, note, norm_hash, author, mem_type, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&id)
        .bind(&note.user_id)
        .bind(project)
        .bind(seq)
        .bind(note.text.as_str())
        .bind(&hash)
        .bind(&note.author)
        .bind(&note.mem_type)
        .bind(note.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Remembered { id, created: true })
    }

    async fn recall(
        &self,
        user_id: &str,
        project_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<String>> {
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT note FROM (
                SELECT note, created_at, seq FROM notes WHERE user_id = $1 AND project_id = $2
                ORDER BY created_at DESC, seq DESC LIMIT $3
             ) AS newest ORDER BY created_at, seq",
        )
        .bind(user_id)
        .bind(project_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    async fn list_notes(
        &self,
        user_id: &str,
        project_id: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(u64, Vec<Note>)> {
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        // The window count is the total of the same snapshot the page comes from. A page past the
        // end has no row to carry it, so the total is then counted on its own. One statement per
        // selector, so each is planned with its own index.
        let (page, count) = match project_id {
            Some(p) => (
                sqlx::query(concat!(
                    "SELECT ",
                    note_columns!(),
                    ", count(*) OVER () AS total FROM notes WHERE user_id = $1 AND project_id = $2
                     ORDER BY created_at, id LIMIT $3 OFFSET $4"
                ))
                .bind(user_id)
                .bind(p),
                sqlx::query_scalar(
                    "SELECT count(*) FROM notes WHERE user_id = $1 AND project_id = $2",
                )
                .bind(user_id)
                .bind(p),
            ),
            None => (
                sqlx::query(concat!(
                    "SELECT ",
                    note_columns!(),
                    ", count(*) OVER () AS total FROM notes WHERE user_id = $1
                     ORDER BY created_at, id LIMIT $2 OFFSET $3"
                ))
                .bind(user_id),
                sqlx::query_scalar("SELECT count(*) FROM notes WHERE user_id = $1").bind(user_id),
            ),
        };
        let rows = page
            .bind(i64::from(limit))
            .bind(offset)
            .fetch_all(&self.pool)
            .await?;
        let total: i64 = match rows.first() {
            Some(r) => r.try_get("total")?,
            None => count.fetch_one(&self.pool).await?,
        };
        let notes = rows
            .iter()
            .map(note_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((u64::try_from(total).unwrap_or(0), notes))
    }

    async fn delete_note(&self, user_id: &str, id: &str) -> StoreResult<u64> {
        // The full-text vector is a column of the row, so it goes with it.
        Ok(
            sqlx::query("DELETE FROM notes WHERE user_id = $1 AND id = $2")
                .bind(user_id)
                .bind(id)
                .execute(&self.pool)
                .await?
                .rows_affected(),
        )
    }

    async fn delete_project(&self, user_id: &str, project_id: &str) -> StoreResult<u64> {
        // The counter row stays: ids are never reused after a delete.
        Ok(
            sqlx::query("DELETE FROM notes WHERE user_id = $1 AND project_id = $2")
                .bind(user_id)
                .bind(project_id)
                .execute(&self.pool)
                .await?
                .rows_affected(),
        )
    }

    async fn get_note(&self, user_id: &str, id: &str) -> StoreResult<Option<Note>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            note_columns!(),
            " FROM notes WHERE user_id = $1 AND id = $2"
        ))
        .bind(user_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(note_from_row).transpose()
    }

    async fn edit_note(
        &self,
        user_id: &str,
        id: &str,
        text: &NoteText,
    ) -> StoreResult<Option<Note>> {
        // `search` is generated from `note`, so the index follows the edit in this same statement.
        let row = sqlx::query(concat!(
            "UPDATE notes SET note = $1, norm_hash = $2 WHERE user_id = $3 AND id = $4 RETURNING ",
            note_columns!()
        ))
        .bind(text.as_str())
        .bind(norm_hash(&text.folded()))
        .bind(user_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(note_from_row).transpose()
    }

    async fn notes_for_injection(
        &self,
        user_id: &str,
        project_id: &str,
        query: &str,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        let first = sqlx::query(concat!(
            "SELECT ",
            note_columns!(),
            " FROM notes WHERE user_id = $1 AND project_id = $2 ORDER BY created_at, seq LIMIT $3"
        ))
        .bind(user_id)
        .bind(project_id)
        .bind(relevance::fit_probe(budget))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(note_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
        match relevance::whole_project(first, budget) {
            Some(all) => Ok(all),
            None => self.rank_notes(user_id, project_id, query, budget).await,
        }
    }

    async fn count_open_leg(&self) -> StoreResult<()> {
        sqlx::query("UPDATE open_usage SET used = used + 1 WHERE id = 1")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn open_legs(&self) -> StoreResult<i64> {
        Ok(
            sqlx::query_scalar("SELECT used FROM open_usage WHERE id = 1")
                .fetch_optional(&self.pool)
                .await?
                .unwrap_or(0),
        )
    }

    async fn delete_all_notes(&self, user_id: &str) -> StoreResult<u64> {
        let mut tx = self.pool.begin().await?;
        // The id counters stay (they hold no note text), so an id is never reused. Locking them
        // first waits for any remember of this user still holding one, so the notes deleted next
        // include the one it committed.
        sqlx::query("SELECT 1 FROM note_counters WHERE user_id = $1 FOR UPDATE")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let deleted = sqlx::query("DELETE FROM notes WHERE user_id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted)
    }

    async fn forget_counters(&self, user_id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM note_counters WHERE user_id = $1")
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        AuthStore::ping(self).await
    }
}
