//! SQLite queries of the usage ledger: aggregates (from the daily roll-up), pages of records,
//! erasure and pruning. Batches of records are written by `ledger`, on the quota writes'
//! connection.

use async_trait::async_trait;
use sqlx::Row;

use super::SqliteStore;
use crate::store::StoreResult;
use crate::store::usage::{
    Budgets, GroupBy, LegFilter, LegRecord, MonthState, Reservation, StoredLeg, UsageQuery,
    UsageStore, UsageSums, month_of,
};

/// The sum of an integer column that never fails: SQLite's `SUM` raises "integer overflow" past
/// 2^63, `TOTAL` sums as a float, and the cast holds a float past 2^63 at the largest integer.
fn total(column: &str) -> String {
    format!("CAST(TOTAL({column}) AS INTEGER)")
}

/// The column a grouping keys on; `day` is cast so that every key reads back as text.
fn key_column(group_by: GroupBy) -> &'static str {
    match group_by {
        GroupBy::Day => "CAST(day AS TEXT)",
        GroupBy::Model => "model",
        GroupBy::Project => "NULLIF(project, '')",
        GroupBy::User => "user_id",
    }
}

#[async_trait]
impl UsageStore for SqliteStore {
    async fn insert_legs(&self, records: &[LegRecord]) -> StoreResult<()> {
        let rows = self.writes.ledger(records.to_vec()).await?;
        for request_id in &rows.dropped {
            tracing::info!(%request_id, "a usage record of an erased account was dropped");
        }
        Ok(())
    }

    async fn aggregate(&self, q: &UsageQuery) -> StoreResult<Vec<UsageSums>> {
        // From the daily roll-up: at most days × models × projects rows per account. The key
        // column is one of `key_column`'s fixed names; every value is bound.
        let sql = format!(
            "SELECT {key} AS key, {legs} AS legs, {input} AS input, {cached} AS cached,
                {cache_write} AS cache_write, {output} AS output, SUM(cost) AS cost
             FROM usage_daily
             WHERE (?1 IS NULL OR user_id = ?1) AND day BETWEEN ?2 AND ?3
             GROUP BY {key}",
            key = key_column(q.group_by),
            legs = total("legs"),
            input = total("input"),
            cached = total("cached"),
            cache_write = total("cache_write"),
            output = total("output"),
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&q.user_id)
            .bind(q.from.div_euclid(86_400))
            .bind(q.to.div_euclid(86_400))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(sums).collect()
    }

    async fn legs(
        &self,
        filter: &LegFilter,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<StoredLeg>> {
        let (conditions, values) = filter.conditions(|_| "?".to_owned());
        let sql =
            format!("SELECT * FROM usage_legs WHERE id < ?{conditions} ORDER BY id DESC LIMIT ?");
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(before.unwrap_or(i64::MAX));
        for v in values {
            query = query.bind(v);
        }
        let rows = query.bind(i64::from(limit)).fetch_all(&self.pool).await?;
        rows.iter().map(stored).collect()
    }

    async fn budget_and_month(&self, user_id: &str, month: i64) -> StoreResult<(Option<i64>, i64)> {
        let row = sqlx::query(
            "SELECT (SELECT token_budget FROM usage_budgets WHERE user_id = ?1) AS budget, COALESCE((SELECT CAST(tokens AS INTEGER) FROM usage_months WHERE user_id = ?1 AND month = ?2), 0) AS tokens",
        )
        .bind(user_id)
        .bind(month)
        .fetch_one(&self.pool)
        .await?;
        Ok((row.try_get("budget")?, row.try_get("tokens")?))
    }

    async fn set_budget(&self, user_id: &str, token_budget: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO usage_budgets (user_id, token_budget) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET token_budget = excluded.token_budget",
        )
        .bind(user_id)
        .bind(token_budget)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn set_spend_budget(&self, user_id: &str, usd: f64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO usage_spend_budgets (user_id, spend_budget_usd) VALUES (?, ?) ON CONFLICT (user_id) DO UPDATE SET spend_budget_usd = excluded.spend_budget_usd",
        )
        .bind(user_id)
        .bind(usd)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn delete_user_legs(&self, user_id: &str, counters: bool) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        // The marker first: a record of a leg still running is dropped when it arrives.
        sqlx::query(
            "INSERT INTO usage_erasures (user_id, erased_at, counters) VALUES (?, ?, ?)
             ON CONFLICT (user_id) DO UPDATE SET erased_at = MAX(erased_at, excluded.erased_at),
                counters = counters OR excluded.counters",
        )
        .bind(user_id)
        .bind(crate::store::usage::now_ms())
        .bind(counters)
        .execute(&mut *tx)
        .await?;
        let n = sqlx::query("DELETE FROM usage_legs WHERE user_id = ?")
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM usage_daily WHERE user_id = ?")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        if counters {
            sqlx::query("DELETE FROM usage_months WHERE user_id = ?")
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM usage_budgets WHERE user_id = ?")
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM usage_spend_budgets WHERE user_id = ?")
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(n)
    }

    async fn month_state(&self, user_id: &str, month: i64, now: i64) -> StoreResult<MonthState> {
        super::reservations::month_state(&self.months, &self.pool, user_id, month, now).await
    }

    async fn reserve(
        &self,
        reservation: &Reservation,
        budgets: Budgets,
        now: i64,
    ) -> StoreResult<bool> {
        // On the quota writes' connection, as the leg's admission: behind a ledger batch it
        // waits for that connection's mutex, not in the busy handler's sleeps. Through sqlx when
        // another connection holds the write lock.
        let inline = self
            .writes
            .transaction(|tx| super::reservations::reserve_on(tx, reservation, budgets, now));
        match inline {
            Some(done) => done,
            None => super::reservations::reserve(&self.pool, reservation, budgets, now).await,
        }
    }

    async fn release(&self, id: &str) -> StoreResult<()> {
        super::reservations::release(&self.pool, id).await
    }

    async fn setting_or_init(&self, key: &str, value: &str) -> StoreResult<String> {
        super::reservations::setting_or_init(&self.pool, key, value).await
    }

    async fn prune(&self, before: i64) -> StoreResult<u64> {
        // The roll-up drops the days wholly before `before` and sums the day it falls in again
        // from the records that stay, in the same transaction.
        let day = before.div_euclid(86_400);
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query("DELETE FROM usage_legs WHERE at < ?")
            .bind(before)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM usage_daily WHERE day <= ?")
            .bind(day)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO usage_daily (user_id, day, model, project, legs, input, cached,
                cache_write, output, cost)
             SELECT user_id, day, model, COALESCE(project_id, ''), COUNT(*),
                CAST(TOTAL(input_tokens) AS INTEGER), CAST(TOTAL(cached_input_tokens) AS INTEGER),
                CAST(TOTAL(cache_write_tokens) AS INTEGER), CAST(TOTAL(output_tokens) AS INTEGER),
                SUM(cost_usd)
             FROM usage_legs WHERE day = ?
             GROUP BY user_id, day, model, COALESCE(project_id, '')",
        )
        .bind(day)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        // Month counts older than the oldest kept record's month are of no use to a budget.
        sqlx::query("DELETE FROM usage_months WHERE month < ?")
            .bind(month_of(before))
            .execute(&self.pool)
            .await?;
        // A marker outlives every leg in flight at its erasure long before the retention ends.
        sqlx::query("DELETE FROM usage_erasures WHERE erased_at < ?")
            .bind(before.saturating_mul(1000))
            .execute(&self.pool)
            .await?;
        Ok(n)
    }
}

fn sums(row: &sqlx::sqlite::SqliteRow) -> StoreResult<UsageSums> {
    Ok(UsageSums {
        key: row.try_get("key")?,
        legs: row.try_get("legs")?,
        input_tokens: row.try_get("input")?,
        cached_input_tokens: row.try_get("cached")?,
        cache_write_tokens: row.try_get("cache_write")?,
        output_tokens: row.try_get("output")?,
        cost_usd: row.try_get("cost")?,
    })
}

fn stored(row: &sqlx::sqlite::SqliteRow) -> StoreResult<StoredLeg> {
    let route: String = row.try_get("route")?;
    let status: String = row.try_get("status")?;
    Ok(StoredLeg {
        id: row.try_get("id")?,
        record: LegRecord {
            reservation: None,
            server_tool_uses: row.try_get("server_tool_uses")?,
            estimated: row.try_get::<i64, _>("estimated")? != 0,
            user_id: row.try_get("user_id")?,
            request_id: row.try_get("request_id")?,
            at: row.try_get("at")?,
            route: super::super::usage::route_of(&route),
            model: row.try_get("model")?,
            provider: row.try_get("provider")?,
            project_id: row.try_get("project_id")?,
            status: super::super::usage::status_of(&status),
            input_tokens: row.try_get("input_tokens")?,
            cached_input_tokens: row.try_get("cached_input_tokens")?,
            cache_write_tokens: row.try_get("cache_write_tokens")?,
            output_tokens: row.try_get("output_tokens")?,
            reasoning_tokens: row.try_get("reasoning_tokens")?,
            ttfb_ms: row.try_get("ttfb_ms")?,
            duration_ms: row.try_get("duration_ms")?,
            cost_usd: row.try_get("cost_usd")?,
        },
    })
}
