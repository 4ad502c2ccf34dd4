//! PostgreSQL: budget reservations (`usage_reservations`) and shared settings (`relay_settings`).
//! A reservation takes a transaction-scoped advisory lock on its account first, so two instances
//! reserving for one account queue instead of both reading the same remaining budget.

use sqlx::{PgPool, Row};

use crate::store::StoreResult;
use crate::store::usage::{Budgets, MonthState, Reservation};

pub(super) async fn month_state(
    pool: &PgPool,
    user_id: &str,
    month: i64,
    now: i64,
) -> StoreResult<MonthState> {
    let row = sqlx::query(
        "SELECT (SELECT token_budget FROM usage_budgets WHERE user_id = $1) AS budget,
            COALESCE((SELECT tokens FROM usage_months WHERE user_id = $1 AND month = $2), 0)::BIGINT AS used,
            COALESCE((SELECT SUM(tokens) FROM usage_reservations
                WHERE user_id = $1 AND month = $2 AND expires_at > $3), 0)::BIGINT AS reserved,
            (SELECT spend_budget_usd FROM usage_spend_budgets WHERE user_id = $1) AS spend_budget,
            COALESCE((SELECT cost_usd FROM usage_months WHERE user_id = $1 AND month = $2), 0)::FLOAT8
                AS spent,
            COALESCE((SELECT SUM(cost_usd) FROM usage_reservations
                WHERE user_id = $1 AND month = $2 AND expires_at > $3), 0)::FLOAT8 AS reserved_usd",
    )
    .bind(user_id)
    .bind(month)
    .bind(now)
    .fetch_one(pool)
    .await?;
    Ok(MonthState {
        own_budget: row.try_get("budget")?,
        used: row.try_get("used")?,
        reserved: row.try_get("reserved")?,
        own_spend_budget: row.try_get("spend_budget")?,
        spent: row.try_get("spent")?,
        reserved_usd: row.try_get("reserved_usd")?,
    })
}

pub(super) async fn reserve(
    pool: &PgPool,
    r: &Reservation,
    budgets: Budgets,
    now: i64,
) -> StoreResult<bool> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('relay-budget:' || $1, 0))")
        .bind(&r.user_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM usage_reservations WHERE user_id = $1 AND expires_at <= $2")
        .bind(&r.user_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let done = sqlx::query(
        "INSERT INTO usage_reservations (id, user_id, month, tokens, expires_at, cost_usd)
         SELECT $1, $2, $3, $4, $5, $8::FLOAT8
         WHERE ($7::BIGINT < 0 OR COALESCE((SELECT tokens FROM usage_months
                WHERE user_id = $2 AND month = $3), 0)
            + COALESCE((SELECT SUM(tokens) FROM usage_reservations
                WHERE user_id = $2 AND month = $3 AND expires_at > $6), 0)
            + $4 <= $7::BIGINT)
           AND ($9::FLOAT8 < 0 OR COALESCE((SELECT cost_usd FROM usage_months
                WHERE user_id = $2 AND month = $3), 0)
            + COALESCE((SELECT SUM(cost_usd) FROM usage_reservations
                WHERE user_id = $2 AND month = $3 AND expires_at > $6), 0)
            + $8::FLOAT8 <= $9::FLOAT8 + 0.00000001)",
    )
    .bind(&r.id)
    .bind(&r.user_id)
    .bind(r.month)
    .bind(r.tokens)
    .bind(r.expires_at)
    .bind(now)
    .bind(budgets.tokens)
    .bind(r.cost_usd)
    .bind(budgets.spend_usd)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn release(pool: &PgPool, id: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM usage_reservations WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

pub(super) async fn setting_or_init(pool: &PgPool, key: &str, value: &str) -> StoreResult<String> {
    sqlx::query(
        "INSERT INTO relay_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
    )
    .bind(key)
    .bind(value)
    .execute(pool)
    .await?;
    let row = sqlx::query("SELECT value FROM relay_settings WHERE key = $1")
        .bind(key)
        .fetch_one(pool)
        .await?;
    Ok(row.try_get("value")?)
}
