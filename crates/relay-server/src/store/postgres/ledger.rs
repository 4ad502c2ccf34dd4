//! PostgreSQL: a batch of ledger records in a few statements, whatever its size.
//!
//! A batch was three or four statements per record, each a round trip, inside one transaction:
//! about 1,000 round trips for a batch of 256, Relay and a PostgreSQL backend busy with them while
//! the legs ran, which cut the highest leg rate held from 9,500 to 2,125 a second (issue 39). The
//! month counts and the daily roll-up are summed over the batch first (`usage_rows`); the
//! records go in as arrays (`unnest`), each kind of row in one statement, the upserts in key order
//! (two instances' batches lock the rows they share in the same order and cannot deadlock).

use sqlx::{PgPool, Row};

use crate::store::StoreResult;
use crate::store::usage::{LegRecord, saturating_add};
use crate::store::usage_rows::{BatchRows, Erasure, accounts, batch_rows};

/// The advisory lock key (`relayuer` in ASCII: relay, usage, erasure) that orders ledger batches
/// against erasures.
pub(super) const ERASURE_LOCK: i64 = 0x7265_6c61_7975_6572;

const INSERT_LEGS: &str = "INSERT INTO usage_legs (user_id, request_id, at, day, route, model,
        provider, project_id, status, input_tokens, cached_input_tokens, cache_write_tokens,
        output_tokens, reasoning_tokens, ttfb_ms, duration_ms, cost_usd, estimated, server_tool_uses)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[],
        $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::bigint[],
        $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[], $16::bigint[],
        $17::float8[], $18::bool[], $19::bigint[])";

const ADD_MONTHS: &str = concat!(
    "INSERT INTO usage_months (user_id, month, tokens, cost_usd)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::float8[])
     ON CONFLICT (user_id, month) DO UPDATE SET
        cost_usd = usage_months.cost_usd + excluded.cost_usd, tokens = ",
    saturating_add!("usage_months.tokens", "excluded.tokens")
);

const ADD_DAYS: &str = concat!(
    "INSERT INTO usage_daily (user_id, day, model, project, legs, input, cached, cache_write,
        output, cost)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[],
        $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::float8[])
     ON CONFLICT (user_id, day, model, project) DO UPDATE SET legs = ",
    saturating_add!("usage_daily.legs", "excluded.legs"),
    ", input = ",
    saturating_add!("usage_daily.input", "excluded.input"),
    ", cached = ",
    saturating_add!("usage_daily.cached", "excluded.cached"),
    ", cache_write = ",
    saturating_add!("usage_daily.cache_write", "excluded.cache_write"),
    ", output = ",
    saturating_add!("usage_daily.output", "excluded.output"),
    ", cost = CASE WHEN usage_daily.cost IS NULL AND excluded.cost IS NULL THEN NULL
            ELSE COALESCE(usage_daily.cost, 0) + COALESCE(excluded.cost, 0) END"
);

/// One column of the batch's records as an array to bind.
fn column<T>(rows: &[LegRecord], f: impl Fn(&LegRecord) -> T) -> Vec<T> {
    rows.iter().map(f).collect()
}

/// Writes `records` in one transaction; the rows written.
pub(super) async fn write(pool: &PgPool, records: &[LegRecord]) -> StoreResult<BatchRows> {
    let mut tx = pool.begin().await?;
    // Shared with other batches, exclusive to an erasure: an erasure is either wholly before
    // this batch (its marker drops the records) or wholly after it (it deletes them).
    sqlx::query("SELECT pg_advisory_xact_lock_shared($1)")
        .bind(ERASURE_LOCK)
        .execute(&mut *tx)
        .await?;
    let markers = sqlx::query(
        "SELECT user_id, erased_at, counters FROM usage_erasures WHERE user_id = ANY($1)",
    )
    .bind(accounts(records))
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(|row| {
        Ok((
            row.try_get::<String, _>("user_id")?,
            Erasure {
                erased_at: row.try_get("erased_at")?,
                counters: row.try_get("counters")?,
            },
        ))
    })
    .collect::<StoreResult<Vec<_>>>()?;
    let rows = batch_rows(records, |user| {
        markers
            .iter()
            .find_map(|(u, m)| (u.as_str() == user).then_some(*m))
    });
    let legs = &rows.legs;
    if !legs.is_empty() {
        sqlx::query(INSERT_LEGS)
            .bind(column(legs, |r| r.user_id.clone()))
            .bind(column(legs, |r| r.request_id.clone()))
            .bind(column(legs, |r| r.at))
            .bind(column(legs, |r| r.at.div_euclid(86_400)))
            .bind(column(legs, |r| r.route.as_str().to_owned()))
            .bind(column(legs, |r| r.model.clone()))
            .bind(column(legs, |r| r.provider.clone()))
            .bind(column(legs, |r| r.project_id.clone()))
            .bind(column(legs, |r| r.status.to_owned()))
            .bind(column(legs, |r| r.input_tokens))
            .bind(column(legs, |r| r.cached_input_tokens))
            .bind(column(legs, |r| r.cache_write_tokens))
            .bind(column(legs, |r| r.output_tokens))
            .bind(column(legs, |r| r.reasoning_tokens))
            .bind(column(legs, |r| r.ttfb_ms))
            .bind(column(legs, |r| r.duration_ms))
            .bind(column(legs, |r| r.cost_usd))
            .bind(column(legs, |r| r.estimated))
            .bind(column(legs, |r| r.server_tool_uses))
            .execute(&mut *tx)
            .await?;
    }
    if !rows.months.is_empty() {
        let m = &rows.months;
        sqlx::query(ADD_MONTHS)
            .bind(m.iter().map(|m| m.user_id.clone()).collect::<Vec<_>>())
            .bind(m.iter().map(|m| m.month).collect::<Vec<_>>())
            .bind(m.iter().map(|m| m.tokens).collect::<Vec<_>>())
            .bind(m.iter().map(|m| m.cost).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
    }
    if !rows.daily.is_empty() {
        let d = &rows.daily;
        sqlx::query(ADD_DAYS)
            .bind(d.iter().map(|d| d.user_id.clone()).collect::<Vec<_>>())
            .bind(d.iter().map(|d| d.day).collect::<Vec<_>>())
            .bind(d.iter().map(|d| d.model.clone()).collect::<Vec<_>>())
            .bind(d.iter().map(|d| d.project.clone()).collect::<Vec<_>>())
            .bind(d.iter().map(|d| d.legs).collect::<Vec<_>>())
            .bind(d.iter().map(|d| d.input).collect::<Vec<_>>())
            .bind(d.iter().map(|d| d.cached).collect::<Vec<_>>())
            .bind(d.iter().map(|d| d.cache_write).collect::<Vec<_>>())
            .bind(d.iter().map(|d| d.output).collect::<Vec<_>>())
            .bind(d.iter().map(|d| d.cost).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
    }
    if !rows.settled.is_empty() {
        sqlx::query("DELETE FROM usage_reservations WHERE id = ANY($1)")
            .bind(&rows.settled)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(rows)
}
