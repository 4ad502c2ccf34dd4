//! SQLite: a batch of ledger records written on the leg writes' own rusqlite connection
//! (`batch::QuotaWrites::ledger`), with prepared statements and one statement per record.
//!
//! Through sqlx a batch of 256 records was about 800 statements, each a hand-off to sqlx's
//! worker thread, inside one `BEGIN IMMEDIATE` transaction: SQLite's one write lock was held for
//! milliseconds, and every leg's quota write in that time found it busy and slept in SQLite's
//! busy handler (1, 2, 5, 10 ms …), which was the whole p99 of a leg with the ledger on (issue
//! 39). Here the month counts and the daily roll-up are summed over the batch first
//! (`usage_rows`), so a batch is one insert per record and one upsert per account and month and
//! per roll-up row, run without a hand-off; and it shares its connection's lock with the legs'
//! quota writes, so a leg that comes while a batch is written waits that short transaction on a
//! mutex rather than in the busy handler's sleeps.

use rusqlite::{OptionalExtension, Transaction, params};

use crate::store::usage::{LegRecord, saturating_add};
use crate::store::usage_rows::{BatchRows, Erasure, accounts, batch_rows};

const ERASURE: &str = "SELECT erased_at, counters FROM usage_erasures WHERE user_id = ?1";

const INSERT_LEG: &str = "INSERT INTO usage_legs (user_id, request_id, at, day, route, model,
        provider, project_id, status, input_tokens, cached_input_tokens, cache_write_tokens,
        output_tokens, reasoning_tokens, ttfb_ms, duration_ms, cost_usd, estimated, server_tool_uses)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)";

const ADD_MONTH: &str = concat!(
    "INSERT INTO usage_months (user_id, month, tokens, cost_usd) VALUES (?1, ?2, ?3, ?4)
     ON CONFLICT (user_id, month) DO UPDATE SET cost_usd = cost_usd + excluded.cost_usd, tokens = ",
    saturating_add!("tokens", "excluded.tokens")
);

const ADD_DAY: &str = concat!(
    "INSERT INTO usage_daily (user_id, day, model, project, legs, input, cached, cache_write,
        output, cost)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
     ON CONFLICT (user_id, day, model, project) DO UPDATE SET legs = ",
    saturating_add!("legs", "excluded.legs"),
    ", input = ",
    saturating_add!("input", "excluded.input"),
    ", cached = ",
    saturating_add!("cached", "excluded.cached"),
    ", cache_write = ",
    saturating_add!("cache_write", "excluded.cache_write"),
    ", output = ",
    saturating_add!("output", "excluded.output"),
    ", cost = CASE WHEN cost IS NULL AND excluded.cost IS NULL THEN NULL
            ELSE COALESCE(cost, 0) + COALESCE(excluded.cost, 0) END"
);

const SETTLE: &str = "DELETE FROM usage_reservations WHERE id = ?1";

/// Writes `records` inside `tx` (an IMMEDIATE transaction: the erasure markers are read under
/// the write lock, so an erasure is wholly before or wholly after the batch); the rows written.
pub(super) fn write(tx: &Transaction<'_>, records: &[LegRecord]) -> rusqlite::Result<BatchRows> {
    let mut markers = Vec::new();
    {
        let mut read = tx.prepare_cached(ERASURE)?;
        for user in accounts(records) {
            let marker = read
                .query_row([&user], |row| {
                    Ok(Erasure {
                        erased_at: row.get(0)?,
                        counters: row.get::<_, i64>(1)? != 0,
                    })
                })
                .optional()?;
            if let Some(marker) = marker {
                markers.push((user, marker));
            }
        }
    }
    let rows = batch_rows(records, |user| {
        markers
            .iter()
            .find_map(|(u, m)| (u.as_str() == user).then_some(*m))
    });
    let mut insert = tx.prepare_cached(INSERT_LEG)?;
    for r in &rows.legs {
        insert.execute(params![
            r.user_id,
            r.request_id,
            r.at,
            r.at.div_euclid(86_400),
            r.route.as_str(),
            r.model,
            r.provider,
            r.project_id,
            r.status,
            r.input_tokens,
            r.cached_input_tokens,
            r.cache_write_tokens,
            r.output_tokens,
            r.reasoning_tokens,
            r.ttfb_ms,
            r.duration_ms,
            r.cost_usd,
            i64::from(r.estimated),
            r.server_tool_uses,
        ])?;
    }
    let mut month = tx.prepare_cached(ADD_MONTH)?;
    for m in &rows.months {
        month.execute(params![m.user_id, m.month, m.tokens, m.cost])?;
    }
    let mut day = tx.prepare_cached(ADD_DAY)?;
    for d in &rows.daily {
        day.execute(params![
            d.user_id,
            d.day,
            d.model,
            d.project,
            d.legs,
            d.input,
            d.cached,
            d.cache_write,
            d.output,
            d.cost
        ])?;
    }
    let mut settle = tx.prepare_cached(SETTLE)?;
    for id in &rows.settled {
        settle.execute([id])?;
    }
    Ok(rows)
}
