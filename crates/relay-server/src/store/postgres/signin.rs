//! PostgreSQL queries of agents' sign-in: device codes, token families and API keys.

use async_trait::async_trait;

use super::PgStore;
use crate::store::StoreResult;

/// The scope of the document every account without its own gets.
const SHARED: &str = "*";
use crate::store::rows::{self, UserRow, user_columns};
use crate::store::signin::{
    AgentSettings, ApiKey, DevicePoll, NEVER, NewApiKey, NewDeviceCode, PendingDevice, Refreshed,
    SignInStore, TokenPair,
};

#[async_trait]
impl SignInStore for PgStore {
    async fn create_device_code(&self, code: NewDeviceCode) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO device_codes (code_hash, user_code, surface, user_agent, status, created_at, expires_at)
             VALUES ($1, $2, $3, $4, 'pending', $5, $6)",
        )
        .bind(&code.code_hash)
        .bind(&code.user_code)
        .bind(&code.surface)
        .bind(&code.user_agent)
        .bind(code.created_at)
        .bind(code.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn pending_device(
        &self,
        user_code: &str,
        now: f64,
    ) -> StoreResult<Option<PendingDevice>> {
        let row: Option<rows::PendingDeviceRow> = sqlx::query_as(
            "SELECT user_code, surface, user_agent, expires_at FROM device_codes
             WHERE user_code = $1 AND status = 'pending' AND expires_at > $2",
        )
        .bind(user_code)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(Into::into))
    }

    async fn decide_device(
        &self,
        user_code: &str,
        user_id: Option<&str>,
        now: f64,
    ) -> StoreResult<bool> {
        let status = if user_id.is_some() {
            "approved"
        } else {
            "denied"
        };
        let done = sqlx::query(
            "UPDATE device_codes SET status = $1, user_id = $2
             WHERE user_code = $3 AND status = 'pending' AND expires_at > $4",
        )
        .bind(status)
        .bind(user_id)
        .bind(user_code)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn poll_device(&self, code_hash: &str, now: f64) -> StoreResult<DevicePoll> {
        // The approved code is used up by the statement that reads it: two polls racing for one
        // approval cannot both get a token.
        let used: Option<(String,)> = sqlx::query_as(
            "UPDATE device_codes SET status = 'used', last_poll_at = $1
             WHERE code_hash = $2 AND status = 'approved' AND expires_at > $3
             RETURNING user_id",
        )
        .bind(now)
        .bind(code_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        if let Some((user_id,)) = used {
            let row: Option<UserRow> = sqlx::query_as(concat!(
                "SELECT ",
                user_columns!(),
                " FROM users WHERE id = $1"
            ))
            .bind(&user_id)
            .fetch_optional(&self.pool)
            .await?;
            return Ok(rows::user(row)?.map_or(DevicePoll::Unknown, DevicePoll::Approved));
        }
        let row: Option<(String, f64, Option<f64>)> = sqlx::query_as(
            "SELECT status, expires_at, last_poll_at FROM device_codes WHERE code_hash = $1",
        )
        .bind(code_hash)
        .fetch_optional(&self.pool)
        .await?;
        let Some((status, expires_at, last_poll_at)) = row else {
            return Ok(DevicePoll::Unknown);
        };
        sqlx::query("UPDATE device_codes SET last_poll_at = $1 WHERE code_hash = $2")
            .bind(now)
            .bind(code_hash)
            .execute(&self.pool)
            .await?;
        Ok(rows::device_poll(&status, expires_at, last_poll_at, now))
    }

    async fn create_token_pair(
        &self,
        user_id: &str,
        pair: &TokenPair,
        now: f64,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        insert_pair(&mut tx, user_id, &pair.family, pair, now).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn refresh(&self, old_hash: &str, pair: &TokenPair, now: f64) -> StoreResult<Refreshed> {
        let mut tx = self.pool.begin().await?;
        let spent: Option<(String, String)> = sqlx::query_as(
            "UPDATE refresh_tokens SET used_at = $1
             WHERE token_hash = $2 AND used_at IS NULL AND expires_at > $3
             RETURNING family, user_id",
        )
        .bind(now)
        .bind(old_hash)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((family, user_id)) = spent {
            insert_pair(&mut tx, &user_id, &family, pair, now).await?;
            let row: Option<UserRow> = sqlx::query_as(concat!(
                "SELECT ",
                user_columns!(),
                " FROM users WHERE id = $1"
            ))
            .bind(&user_id)
            .fetch_optional(&mut *tx)
            .await?;
            tx.commit().await?;
            return Ok(rows::user(row)?.map_or(Refreshed::Invalid, Refreshed::Rotated));
        }
        let reused: Option<(String,)> = sqlx::query_as(
            "SELECT family FROM refresh_tokens WHERE token_hash = $1 AND used_at IS NOT NULL",
        )
        .bind(old_hash)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((family,)) = reused else {
            return Ok(Refreshed::Invalid);
        };
        revoke_family(&mut tx, &family).await?;
        tx.commit().await?;
        Ok(Refreshed::Reused)
    }

    async fn revoke_token(&self, token_hash: &str) -> StoreResult<()> {
        // A refresh token ends its whole sign-in; an access token only itself (RFC 7009 §2.1).
        let mut tx = self.pool.begin().await?;
        let family: Option<(String,)> =
            sqlx::query_as("SELECT family FROM refresh_tokens WHERE token_hash = $1")
                .bind(token_hash)
                .fetch_optional(&mut *tx)
                .await?;
        if let Some((family,)) = family {
            revoke_family(&mut tx, &family).await?;
        } else {
            sqlx::query("DELETE FROM sessions WHERE token_hash = $1 AND key_id IS NULL")
                .bind(token_hash)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn revoke_user_sessions(&self, user_id: &str) -> StoreResult<u64> {
        let mut tx = self.pool.begin().await?;
        let sessions = sqlx::query("DELETE FROM sessions WHERE user_id = $1 AND key_id IS NULL")
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let refresh = sqlx::query("DELETE FROM refresh_tokens WHERE user_id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(sessions + refresh)
    }

    async fn create_api_key(&self, key: &NewApiKey) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO api_keys (id, user_id, name, prefix, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&key.id)
        .bind(&key.user_id)
        .bind(&key.name)
        .bind(&key.prefix)
        .bind(key.created_at)
        .bind(key.expires_at)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO sessions (token_hash, user_id, created_at, expires_at, key_id)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&key.token_hash)
        .bind(&key.user_id)
        .bind(key.created_at)
        .bind(key.expires_at.unwrap_or(NEVER))
        .bind(&key.id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn list_api_keys(&self, user_id: Option<&str>) -> StoreResult<Vec<ApiKey>> {
        let rows: Vec<rows::ApiKeyRow> = sqlx::query_as(
            "SELECT k.id, k.user_id, u.email, k.name, k.prefix, k.created_at, k.expires_at, k.last_used_at
             FROM api_keys k JOIN users u ON u.id = k.user_id
             WHERE $1::text IS NULL OR k.user_id = $2
             ORDER BY k.created_at DESC, k.id",
        )
        .bind(user_id)
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn revoke_api_key(&self, id: &str, user_id: Option<&str>) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let gone = sqlx::query(
            "DELETE FROM api_keys WHERE id = $1 AND ($2::text IS NULL OR user_id = $3)",
        )
        .bind(id)
        .bind(user_id)
        .bind(user_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if gone == 1 {
            sqlx::query("DELETE FROM sessions WHERE key_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(gone == 1)
    }

    async fn touch_api_key(&self, token_hash: &str, now: f64) -> StoreResult<()> {
        // A read first: most uses fall within the minute, and a read takes no write lock.
        let key: Option<(String, Option<f64>)> = sqlx::query_as(
            "SELECT k.id, k.last_used_at FROM sessions s JOIN api_keys k ON k.id = s.key_id WHERE s.token_hash = $1",
        )
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await?;
        if let Some((id, last)) = key
            && last.is_none_or(|t| now - t >= 60.0)
        {
            sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
                .bind(now)
                .bind(&id)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }
    async fn agent_settings(&self, user_id: Option<&str>) -> StoreResult<Option<AgentSettings>> {
        let row: Option<(String, String, f64)> = sqlx::query_as(
            "SELECT uuid, settings, updated_at FROM agent_settings WHERE scope = $1",
        )
        .bind(user_id.unwrap_or(SHARED))
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(uuid, settings, updated_at)| AgentSettings {
            uuid,
            settings,
            updated_at,
        }))
    }

    async fn put_agent_settings(
        &self,
        user_id: Option<&str>,
        settings: &str,
        new_uuid: &str,
        now: f64,
    ) -> StoreResult<AgentSettings> {
        let (uuid,): (String,) = sqlx::query_as(
            "INSERT INTO agent_settings (scope, user_id, uuid, settings, updated_at)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (scope) DO UPDATE SET settings = excluded.settings, updated_at = excluded.updated_at
             RETURNING uuid",
        )
        .bind(user_id.unwrap_or(SHARED))
        .bind(user_id)
        .bind(new_uuid)
        .bind(settings)
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        Ok(AgentSettings {
            uuid,
            settings: settings.to_owned(),
            updated_at: now,
        })
    }

    async fn delete_agent_settings(&self, user_id: Option<&str>) -> StoreResult<bool> {
        let gone = sqlx::query("DELETE FROM agent_settings WHERE scope = $1")
            .bind(user_id.unwrap_or(SHARED))
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(gone == 1)
    }
}

async fn insert_pair(
    tx: &mut sqlx::PgConnection,
    user_id: &str,
    family: &str,
    pair: &TokenPair,
    now: f64,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO sessions (token_hash, user_id, created_at, expires_at, family) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&pair.access_hash)
    .bind(user_id)
    .bind(now)
    .bind(pair.access_expires_at)
    .bind(family)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO refresh_tokens (token_hash, family, user_id, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&pair.refresh_hash)
    .bind(family)
    .bind(user_id)
    .bind(now)
    .bind(pair.refresh_expires_at)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

async fn revoke_family(tx: &mut sqlx::PgConnection, family: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM sessions WHERE family = $1")
        .bind(family)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM refresh_tokens WHERE family = $1")
        .bind(family)
        .execute(&mut *tx)
        .await?;
    Ok(())
}
