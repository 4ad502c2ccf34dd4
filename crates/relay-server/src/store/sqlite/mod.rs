//! The SQLite backend: one file, WAL, a busy timeout, migrations embedded and applied at open.

use std::str::FromStr;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{
    Admission, AuthStore, InjectBudget, MemoryStore, NewNote, NewUser, Note, Remembered,
    StoreOptions, StoreResult, User, UserChanges, note_id, relevance,
};
use crate::domain::{NoteText, Role};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("src/store/sqlite/migrations");

pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// The project's notes most relevant to `query` by bm25, within `budget`.
    ///
    /// The full-text search is the outer loop and ranks on its own (bm25 over the window of the
    /// newest `CANDIDATE_WINDOW` matches, best 64 kept) before any note row is read: joining first
    /// let the planner run the MATCH once per note of the project, which measured 271 ms per leg
    /// with 2,000 notes (relay-bench inject) instead of about a millisecond.
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
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&fts_query)
            .bind(&fts_query)
            .bind(user_id)
            .bind(project_id)
            .fetch_all(&self.pool)
            .await?;
        let ranked = rows
            .iter()
            .map(|r| Ok((note_from_row(r)?, r.try_get::<f64, _>("score")?)))
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(relevance::select(ranked, budget))
    }

    /// Opens (creating the file and its directory if needed) and migrates.
    pub async fn open(url: &str, options: &StoreOptions) -> anyhow::Result<Self> {
        let connect = SqliteConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("cannot parse SQLite URL: {e}"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // NORMAL in WAL mode loses nothing on a process crash (kill -9); only a power cut can
            // drop the last transactions, which a laptop or single-box deployment accepts.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(options.busy_timeout)
            .foreign_keys(true);
        let path = connect.get_filename().to_owned();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                anyhow::anyhow!("cannot create the data directory {}: {e}", dir.display())
            })?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.busy_timeout)
            .connect_with(connect)
            .await
            .map_err(|e| anyhow::anyhow!("cannot open SQLite database {}: {e}", path.display()))?;
        MIGRATOR.run(&pool).await.map_err(|e| {
            anyhow::anyhow!("cannot migrate SQLite database {}: {e}", path.display())
        })?;
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

fn user_from_row(row: &sqlx::sqlite::SqliteRow) -> StoreResult<User> {
    let role: String = row.try_get("role")?;
    Ok(User {
        id: row.try_get("id")?,
        email: row.try_get("email")?,
        role: Role::parse(&role).map_err(super::StoreError::Internal)?,
        limit: row.try_get("quota_limit")?,
        used: row.try_get("used")?,
        created_at: row.try_get("created_at")?,
    })
}

/// The columns `user_from_row` reads, spliced into queries at compile time.
macro_rules! user_columns {
    () => {
        "id, email, role, quota_limit, used, created_at"
    };
}

#[async_trait]
impl AuthStore for SqliteStore {
    async fn create_user(&self, user: NewUser) -> StoreResult<User> {
        sqlx::query(
            "INSERT INTO users (id, email, password_hash, role, quota_limit, used, created_at)
             VALUES (?, ?, ?, ?, ?, 0, ?)",
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
            ", password_hash FROM users WHERE email = ?"
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
            " FROM users ORDER BY created_at, email LIMIT ? OFFSET ?"
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
                role = COALESCE(?, role),
                quota_limit = COALESCE(?, quota_limit),
                used = CASE WHEN ? THEN 0 ELSE used END
             WHERE email = ?
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
            "DELETE FROM users WHERE email = ? RETURNING ",
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
        sqlx::query("INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)")
            .bind(token_hash)
            .bind(user_id)
            .bind(now)
            .bind(expires_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn session(&self, token_hash: &str, now: f64) -> StoreResult<Option<(User, f64)>> {
        let row = sqlx::query(
            "SELECT u.id, u.email, u.role, u.quota_limit, u.used, u.created_at, s.expires_at
             FROM sessions s JOIN users u ON u.id = s.user_id
             WHERE s.token_hash = ? AND s.expires_at > ?",
        )
        .bind(token_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok((user_from_row(&r)?, r.try_get("expires_at")?)))
            .transpose()
    }

    async fn delete_session(&self, token_hash: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM sessions WHERE token_hash = ?")
            .bind(token_hash)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn admit_leg(&self, user_id: &str) -> StoreResult<Admission> {
        // Check and increment in one statement: SQLite serialises writers, so no two legs can both
        // see the last unit.
        let done = sqlx::query(
            "UPDATE users SET used = used + 1
             WHERE id = ? AND (role = 'admin' OR quota_limit < 0 OR used < quota_limit)",
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
        sqlx::query("UPDATE users SET used = used - 1 WHERE id = ? AND used > 0")
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn add_to_waitlist(&self, email: &str, source: &str, now: f64) -> StoreResult<()> {
        sqlx::query("INSERT INTO waitlist (email, source, created_at) VALUES (?, ?, ?) ON CONFLICT (email) DO NOTHING")
            .bind(email)
            .bind(source)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        // Readiness means "can take a write": `SELECT 1` passes while another process holds the
        // write lock, yet every remember would then fail. Taking and releasing the lock checks both.
        let tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        tx.rollback().await?;
        Ok(())
    }
}

/// The columns `note_from_row` reads.
macro_rules! note_columns {
    () => {
        "id, project_id, note, author, mem_type, created_at"
    };
}

fn note_from_row(row: &sqlx::sqlite::SqliteRow) -> StoreResult<Note> {
    Ok(Note {
        id: row.try_get("id")?,
        project_id: row.try_get("project_id")?,
        note: row.try_get("note")?,
        author: row.try_get("author")?,
        mem_type: row.try_get("mem_type")?,
        created_at: row.try_get("created_at")?,
    })
}

/// The full-text row of a note carries a token naming its (user, project), so a search reads only
/// that project's postings instead of filtering every user's matches afterwards.
fn scope_token(user_id: &str, project_id: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{user_id}#{project_id}").as_bytes());
    format!("s{}", hex::encode(&digest[..12]))
}

fn norm_hash(folded: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(folded.as_bytes()))
}

/// Removes the full-text rows of the notes `selector` picks, then the notes; in the caller's transaction.
async fn delete_notes_where(
    tx: &mut sqlx::SqliteConnection,
    selector: &'static str,
    binds: &[&str],
) -> StoreResult<u64> {
    let fts = match selector {
        "id" => {
            "DELETE FROM notes_fts WHERE rowid IN (SELECT pk FROM notes WHERE user_id = ? AND id = ?)"
        }
        "project" => {
            "DELETE FROM notes_fts WHERE rowid IN (SELECT pk FROM notes WHERE user_id = ? AND project_id = ?)"
        }
        _ => "DELETE FROM notes_fts WHERE rowid IN (SELECT pk FROM notes WHERE user_id = ?)",
    };
    let notes = match selector {
        "id" => "DELETE FROM notes WHERE user_id = ? AND id = ?",
        "project" => "DELETE FROM notes WHERE user_id = ? AND project_id = ?",
        _ => "DELETE FROM notes WHERE user_id = ?",
    };
    let mut q = sqlx::query(fts);
    for b in binds {
        q = q.bind(*b);
    }
    q.execute(&mut *tx).await?;
    let mut q = sqlx::query(notes);
    for b in binds {
        q = q.bind(*b);
    }
    Ok(q.execute(&mut *tx).await?.rows_affected())
}

#[async_trait]
impl MemoryStore for SqliteStore {
    async fn remember(&self, note: NewNote) -> StoreResult<Remembered> {
        let folded = note.text.folded();
        let hash = norm_hash(&folded);
        let project = note.project_id.as_str();
        // IMMEDIATE takes the write lock first, so concurrent remembers queue on the busy timeout
        // instead of failing to upgrade a read lock.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let existing = sqlx::query(
            "SELECT id, note FROM notes WHERE user_id = ? AND project_id = ? AND norm_hash = ?",
        )
        .bind(&note.user_id)
        .bind(project)
        .bind(&hash)
        .fetch_all(&mut *tx)
        .await?;
        for row in &existing {
            let text: String = row.try_get("note")?;
            if text.split_whitespace().collect::<Vec<_>>().join(" ") == folded {
                tx.rollback().await?;
                return Ok(Remembered {
                    id: row.try_get("id")?,
                    created: false,
                });
            }
        }
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO note_counters (user_id, project_id, last_seq) VALUES (?, ?, 1)
             ON CONFLICT (user_id, project_id) DO UPDATE SET last_seq = last_seq + 1
             RETURNING last_seq",
        )
        .bind(&note.user_id)
        .bind(project)
        .fetch_one(&mut *tx)
        .await?;
        let id = note_id(&note.user_id, project, seq);
        let pk: i64 = sqlx::query_scalar(
            "INSERT INTO notes (id, user_id, project_id, seq, note, norm_hash, author, mem_type, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING pk",
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
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO notes_fts (rowid, note, scope) VALUES (?, ?, ?)")
            .bind(pk)
            .bind(note.text.as_str())
            .bind(scope_token(&note.user_id, project))
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
                SELECT note, created_at, seq FROM notes WHERE user_id = ? AND project_id = ?
                ORDER BY created_at DESC, seq DESC LIMIT ?
             ) ORDER BY created_at, seq",
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
        let (total, rows) = match project_id {
            Some(p) => {
                let total: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM notes WHERE user_id = ? AND project_id = ?",
                )
                .bind(user_id)
                .bind(p)
                .fetch_one(&self.pool)
                .await?;
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    note_columns!(),
                    " FROM notes WHERE user_id = ? AND project_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?"
                ))
                .bind(user_id)
                .bind(p)
                .bind(i64::from(limit))
                .bind(offset)
                .fetch_all(&self.pool)
                .await?;
                (total, rows)
            }
            None => {
                let total: i64 = sqlx::query_scalar("SELECT count(*) FROM notes WHERE user_id = ?")
                    .bind(user_id)
                    .fetch_one(&self.pool)
                    .await?;
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    note_columns!(),
                    " FROM notes WHERE user_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?"
                ))
                .bind(user_id)
                .bind(i64::from(limit))
                .bind(offset)
                .fetch_all(&self.pool)
                .await?;
                (total, rows)
            }
        };
        let notes = rows
            .iter()
            .map(note_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((u64::try_from(total).unwrap_or(0), notes))
    }

    async fn delete_note(&self, user_id: &str, id: &str) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let n = delete_notes_where(&mut tx, "id", &[user_id, id]).await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn delete_project(&self, user_id: &str, project_id: &str) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let n = delete_notes_where(&mut tx, "project", &[user_id, project_id]).await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn get_note(&self, user_id: &str, id: &str) -> StoreResult<Option<Note>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            note_columns!(),
            " FROM notes WHERE user_id = ? AND id = ?"
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
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sqlx::query(concat!(
            "UPDATE notes SET note = ?, norm_hash = ? WHERE user_id = ? AND id = ? RETURNING pk, ",
            note_columns!()
        ))
        .bind(text.as_str())
        .bind(norm_hash(&text.folded()))
        .bind(user_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(None);
        };
        let pk: i64 = row.try_get("pk")?;
        let note = note_from_row(&row)?;
        sqlx::query("UPDATE notes_fts SET note = ? WHERE rowid = ?")
            .bind(text.as_str())
            .bind(pk)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(note))
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
            " FROM notes WHERE user_id = ? AND project_id = ? ORDER BY created_at, seq LIMIT ?"
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
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query(
            "DELETE FROM notes_fts WHERE rowid IN (SELECT pk FROM notes WHERE user_id = ?)",
        )
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        let deleted = sqlx::query("DELETE FROM notes WHERE user_id = ?")
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        // The id counters stay (they hold no note text): an id is never reused, even after this.
        tx.commit().await?;
        Ok(deleted)
    }

    async fn forget_counters(&self, user_id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM note_counters WHERE user_id = ?")
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        AuthStore::ping(self).await
    }
}
