//! SQLite: budget reservations (`usage_reservations`) and shared settings (`relay_settings`).
//! A reservation is one conditional `INSERT`: SQLite runs one writer at a time, so the check
//! and the insert cannot interleave with another instance's.

use sqlx::{Row, SqlitePool};

use crate::store::StoreResult;
use crate::store::usage::{Budgets, MonthState, Reservation};

/// An account's month in one statement: its own budgets, the tokens and USD the month's records
/// counted, and what live reservations hold.
const MONTH_STATE: &str =
    "SELECT (SELECT token_budget FROM usage_budgets WHERE user_id = ?1) AS budget,
        COALESCE((SELECT CAST(tokens AS INTEGER) FROM usage_months
            WHERE user_id = ?1 AND month = ?2), 0) AS used,
        COALESCE((SELECT SUM(tokens) FROM usage_reservations
            WHERE user_id = ?1 AND month = ?2 AND expires_at > ?3), 0) AS reserved,
        (SELECT spend_budget_usd FROM usage_spend_budgets WHERE user_id = ?1) AS spend_budget,
        COALESCE((SELECT cost_usd FROM usage_months WHERE user_id = ?1 AND month = ?2), 0.0)
            AS spent,
        COALESCE((SELECT SUM(cost_usd) FROM usage_reservations
            WHERE user_id = ?1 AND month = ?2 AND expires_at > ?3), 0.0) AS reserved_usd";

/// The month read inline on a read-only connection of its own (`inline_reader`), as the
/// injection snapshot is: every leg's admission reads it, and through sqlx each read was
/// hand-offs to the worker thread and back (about 0.05 ms of CPU a leg at 4,000 legs/s, measured
/// by leaving the read out).
pub(super) struct MonthReader {
    conn: std::sync::Mutex<rusqlite::Connection>,
}

impl MonthReader {
    pub(super) fn open(path: &std::path::Path) -> anyhow::Result<Self> {
        Ok(Self {
            conn: super::inline_reader(path, "budget reads")?,
        })
    }

    fn read(&self, user_id: &str, month: i64, now: i64) -> rusqlite::Result<MonthState> {
        let conn = super::injection::lock(&self.conn);
        conn.prepare_cached(MONTH_STATE)?
            .query_row(rusqlite::params![user_id, month, now], |row| {
                Ok(MonthState {
                    own_budget: row.get("budget")?,
                    used: row.get("used")?,
                    reserved: row.get("reserved")?,
                    own_spend_budget: row.get("spend_budget")?,
                    spent: row.get("spent")?,
                    reserved_usd: row.get("reserved_usd")?,
                })
            })
    }
}

/// The account's month: inline on `reader`, else (a lock met) through sqlx.
pub(super) async fn month_state(
    reader: &MonthReader,
    pool: &SqlitePool,
    user_id: &str,
    month: i64,
    now: i64,
) -> StoreResult<MonthState> {
    if let Ok(state) = reader.read(user_id, month, now) {
        return Ok(state);
    }
    let row = sqlx::query(MONTH_STATE)
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

/// Deletes the account's expired reservations and stores `r` if it fits every limited budget
/// (`?7` tokens, `?9` USD; below 0 is unlimited). A cent's millionth of slack absorbs the
/// rounding of summed prices.
const EXPIRED: &str = "DELETE FROM usage_reservations WHERE user_id = ?1 AND expires_at <= ?2";
const RESERVE: &str = "INSERT INTO usage_reservations (id, user_id, month, tokens, expires_at, cost_usd)
     SELECT ?1, ?2, ?3, ?4, ?5, ?8
     WHERE (?7 < 0 OR COALESCE((SELECT tokens FROM usage_months WHERE user_id = ?2 AND month = ?3), 0)
        + COALESCE((SELECT SUM(tokens) FROM usage_reservations
            WHERE user_id = ?2 AND month = ?3 AND expires_at > ?6), 0)
        + ?4 <= ?7)
       AND (?9 < 0 OR COALESCE((SELECT cost_usd FROM usage_months WHERE user_id = ?2 AND month = ?3), 0)
        + COALESCE((SELECT SUM(cost_usd) FROM usage_reservations
            WHERE user_id = ?2 AND month = ?3 AND expires_at > ?6), 0)
        + ?8 <= ?9 + 0.00000001)";

/// `reserve` inside a transaction of the quota writes' rusqlite connection.
pub(super) fn reserve_on(
    tx: &rusqlite::Transaction<'_>,
    r: &Reservation,
    budgets: Budgets,
    now: i64,
) -> rusqlite::Result<bool> {
    tx.prepare_cached(EXPIRED)?
        .execute(rusqlite::params![r.user_id, now])?;
    let done = tx.prepare_cached(RESERVE)?.execute(rusqlite::params![
        r.id,
        r.user_id,
        r.month,
        r.tokens,
        r.expires_at,
        now,
        budgets.tokens,
        r.cost_usd,
        budgets.spend_usd
    ])?;
    Ok(done == 1)
}

pub(super) async fn reserve(
    pool: &SqlitePool,
    r: &Reservation,
    budgets: Budgets,
    now: i64,
) -> StoreResult<bool> {
    sqlx::query(EXPIRED)
        .bind(&r.user_id)
        .bind(now)
        .execute(pool)
        .await?;
    let done = sqlx::query(RESERVE)
        .bind(&r.id)
        .bind(&r.user_id)
        .bind(r.month)
        .bind(r.tokens)
        .bind(r.expires_at)
        .bind(now)
        .bind(budgets.tokens)
        .bind(r.cost_usd)
        .bind(budgets.spend_usd)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn release(pool: &SqlitePool, id: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM usage_reservations WHERE id = ?")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

pub(super) async fn setting_or_init(
    pool: &SqlitePool,
    key: &str,
    value: &str,
) -> StoreResult<String> {
    sqlx::query(
        "INSERT INTO relay_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
    )
    .bind(key)
    .bind(value)
    .execute(pool)
    .await?;
    let row = sqlx::query("SELECT value FROM relay_settings WHERE key = ?")
        .bind(key)
        .fetch_one(pool)
        .await?;
    Ok(row.try_get("value")?)
}
