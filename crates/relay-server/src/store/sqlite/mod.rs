//! The SQLite backend: one file, WAL, a busy timeout, migrations embedded and applied at open.

use std::str::FromStr;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{
    Admission, AuthStore, MemoryStore, NewUser, StoreOptions, StoreResult, User, UserChanges,
};
use crate::domain::Role;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("src/store/sqlite/migrations");

pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
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

    async fn session_user(&self, token_hash: &str, now: f64) -> StoreResult<Option<User>> {
        let row = sqlx::query(
            "SELECT u.id, u.email, u.role, u.quota_limit, u.used, u.created_at
             FROM sessions s JOIN users u ON u.id = s.user_id
             WHERE s.token_hash = ? AND s.expires_at > ?",
        )
        .bind(token_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(user_from_row).transpose()
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

#[async_trait]
impl MemoryStore for SqliteStore {
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
        sqlx::query("DELETE FROM note_counters WHERE user_id = ?")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(deleted)
    }

    async fn ping(&self) -> StoreResult<()> {
        AuthStore::ping(self).await
    }
}
