//! SQLite queries of accounts, sessions, quota and the waitlist.

use async_trait::async_trait;

use super::SqliteStore;
use crate::domain::Role;
use crate::store::rows::{self, UserRow, UserWithHashRow, user_columns};
use crate::store::{Admission, AuthStore, NewUser, StoreResult, User, UserChanges};

#[async_trait]
impl AuthStore for SqliteStore {
    async fn create_user(&self, user: NewUser) -> StoreResult<User> {
        sqlx::query(
            "INSERT INTO users (id, email, password_hash, role, quota_limit, used, created_at, used_month)
             VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
        )
        .bind(&user.id)
        .bind(user.email.as_str())
        .bind(&user.password_hash)
        .bind(user.role.as_str())
        .bind(user.limit)
        .bind(user.created_at)
        .bind(crate::store::usage::month_of(user.created_at as i64))
        .execute(&self.pool)
        .await?;
        Ok(User {
            id: user.id,
            email: user.email.as_str().to_owned(),
            role: user.role,
            limit: user.limit,
            used: 0,
            created_at: user.created_at,
            allowed_models: None,
        })
    }

    async fn user_by_email(&self, email: &str) -> StoreResult<Option<(User, String)>> {
        let row: Option<UserWithHashRow> = sqlx::query_as(concat!(
            "SELECT ",
            user_columns!(),
            ", password_hash FROM users WHERE email = ?"
        ))
        .bind(email)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok((User::try_from(r.user)?, r.password_hash)))
            .transpose()
    }

    async fn list_users(&self) -> StoreResult<Vec<User>> {
        let rows: Vec<UserRow> = sqlx::query_as(concat!(
            "SELECT ",
            user_columns!(),
            " FROM users ORDER BY created_at, email"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows::users(rows)
    }

    async fn list_users_page(&self, limit: u32, offset: u64) -> StoreResult<(u64, Vec<User>)> {
        let total: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
            .fetch_one(&self.pool)
            .await?;
        let rows: Vec<UserRow> = sqlx::query_as(concat!(
            "SELECT ",
            user_columns!(),
            " FROM users ORDER BY created_at, email LIMIT ? OFFSET ?"
        ))
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        Ok((total.unsigned_abs(), rows::users(rows)?))
    }

    async fn update_user(&self, email: &str, changes: UserChanges) -> StoreResult<Option<User>> {
        let row: Option<UserRow> = sqlx::query_as(concat!(
            "UPDATE users SET
                role = COALESCE(?, role),
                quota_limit = COALESCE(?, quota_limit),
                used = CASE WHEN ? THEN 0 ELSE used END,
                allowed_models = CASE WHEN ? THEN ? ELSE allowed_models END
             WHERE email = ?
             RETURNING ",
            user_columns!()
        ))
        .bind(changes.role.map(Role::as_str))
        .bind(changes.limit)
        .bind(changes.reset_usage)
        .bind(changes.allowed_models.is_some())
        .bind(rows::models_json(changes.allowed_models.as_ref())?)
        .bind(email)
        .fetch_optional(&self.pool)
        .await?;
        rows::user(row)
    }

    async fn delete_user(&self, email: &str) -> StoreResult<Option<User>> {
        // Sessions go with the account through ON DELETE CASCADE.
        let row: Option<UserRow> = sqlx::query_as(concat!(
            "DELETE FROM users WHERE email = ? RETURNING ",
            user_columns!()
        ))
        .bind(email)
        .fetch_optional(&self.pool)
        .await?;
        rows::user(row)
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
        let row: Option<rows::SessionRow> = sqlx::query_as(
            "SELECT u.id, u.email, u.role, u.quota_limit, u.used, u.created_at, u.allowed_models, s.expires_at
             FROM sessions s JOIN users u ON u.id = s.user_id
             WHERE s.token_hash = ? AND s.expires_at > ?",
        )
        .bind(token_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        rows::session(row)
    }

    async fn delete_session(&self, token_hash: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM sessions WHERE token_hash = ?")
            .bind(token_hash)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn admit_leg(&self, user_id: &str) -> StoreResult<Admission> {
        // One conditional UPDATE per leg, alone or batched with concurrent legs' (see `batch`):
        // SQLite serialises writers, so no two legs can both see the last unit.
        self.writes.admit(user_id).await
    }

    async fn refund_leg(&self, user_id: &str) -> StoreResult<()> {
        self.writes.refund(user_id).await
    }

    async fn roll_quota_month(&self, month: i64) -> StoreResult<u64> {
        let done = sqlx::query("UPDATE users SET used = 0, used_month = ? WHERE used_month < ?")
            .bind(month)
            .bind(month)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    async fn unlock_signin(&self, email: &str, now: f64) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE users SET signin_unlocked_at = ? WHERE email = ?")
            .bind(now)
            .bind(email)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn signin_unlocked_at(&self, email: &str) -> StoreResult<Option<f64>> {
        let at: Option<Option<f64>> =
            sqlx::query_scalar("SELECT signin_unlocked_at FROM users WHERE email = ?")
                .bind(email)
                .fetch_optional(&self.pool)
                .await?;
        Ok(at.flatten())
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

    async fn close(&self) {
        self.checkpoints.empty_the_log().await;
    }
}
