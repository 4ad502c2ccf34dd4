//! What a batch of ledger records writes, decided before any statement runs: the records kept
//! (those of an account erased after the leg started are dropped), each account's month count and
//! each daily roll-up row summed over the batch, and the budget reservations the records settle.
//!
//! Both stores write it in a few statements per batch instead of three or four per record, so a
//! batch holds the database (SQLite's one write lock, PostgreSQL's row locks and a backend) for as
//! little time as possible: no leg's quota write or budget reservation waits behind it (issue 39).
//! The erasure markers are read inside the batch's transaction, under the same lock that orders
//! batches against erasures, so the decision is the one the per-record `WHERE` clauses made.

use std::collections::BTreeMap;

use super::usage::LegRecord;

/// An account's erasure marker (`usage_erasures`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Erasure {
    /// Unix milliseconds: records of legs that started at or before it are dropped.
    pub erased_at: i64,
    /// The account was deleted: its month counts go too, not only its records.
    pub counters: bool,
}

/// One account's month count to add to.
#[derive(Debug, Clone, PartialEq)]
pub struct MonthAdd {
    pub user_id: String,
    pub month: i64,
    pub tokens: i64,
    /// USD: the priced records' cost.
    pub cost: f64,
}

/// One daily roll-up row to add to (`project` is `""` for none, as the table keys it).
#[derive(Debug, Clone, PartialEq)]
pub struct DailyAdd {
    pub user_id: String,
    pub day: i64,
    pub model: String,
    pub project: String,
    pub legs: i64,
    pub input: i64,
    pub cached: i64,
    pub cache_write: i64,
    pub output: i64,
    /// `None` while no record of the row had a price.
    pub cost: Option<f64>,
}

/// The rows a batch writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchRows {
    /// The records to insert, clamped (`LegRecord::clamp`), in the batch's order.
    pub legs: Vec<LegRecord>,
    /// Sorted by key, so that two instances' batches take the rows' locks in the same order.
    pub months: Vec<MonthAdd>,
    /// Sorted by key, as `months`.
    pub daily: Vec<DailyAdd>,
    /// The reservations to delete: every record's, written or dropped.
    pub settled: Vec<String>,
    /// Request ids of the records dropped for an erasure (logged by the store).
    pub dropped: Vec<String>,
}

/// Decides what `records` write, given each account's erasure marker (`erasure`, asked once per
/// record). Sums saturate at `i64::MAX`; the stores add them to what is stored the same way.
pub fn batch_rows(records: &[LegRecord], erasure: impl Fn(&str) -> Option<Erasure>) -> BatchRows {
    let mut rows = BatchRows::default();
    let mut months: BTreeMap<(&str, i64), (i64, f64)> = BTreeMap::new();
    let mut daily: BTreeMap<(&str, i64, &str, &str), DailyAdd> = BTreeMap::new();
    for record in records {
        let mut r = record.clone();
        r.clamp();
        let started = r.started_ms();
        let marker = erasure(&r.user_id).filter(|e| e.erased_at >= started);
        if let Some(id) = &r.reservation {
            rows.settled.push(id.clone());
        }
        // Only an account's deletion (`counters`) drops the month count: `DELETE
        // /v1/memory/all` leaves a budget counting what the leg used.
        if !marker.is_some_and(|e| e.counters) {
            let month = months
                .entry((record.user_id.as_str(), r.month()))
                .or_default();
            month.0 = month.0.saturating_add(r.budget_tokens());
            month.1 += r.cost_usd.unwrap_or(0.0);
        }
        if marker.is_some() {
            rows.dropped.push(r.request_id);
            continue;
        }
        let project = record.project_id.as_deref().unwrap_or_default();
        let day = daily
            .entry((
                record.user_id.as_str(),
                r.at.div_euclid(86_400),
                record.model.as_str(),
                project,
            ))
            .or_insert_with(|| DailyAdd {
                user_id: r.user_id.clone(),
                day: r.at.div_euclid(86_400),
                model: r.model.clone(),
                project: project.to_owned(),
                legs: 0,
                input: 0,
                cached: 0,
                cache_write: 0,
                output: 0,
                cost: None,
            });
        day.legs = day.legs.saturating_add(1);
        day.input = day.input.saturating_add(r.input_tokens);
        day.cached = day.cached.saturating_add(r.cached_input_tokens);
        day.cache_write = day.cache_write.saturating_add(r.cache_write_tokens);
        day.output = day.output.saturating_add(r.output_tokens);
        day.cost = match (day.cost, r.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        rows.legs.push(r);
    }
    rows.months = months
        .into_iter()
        .map(|((user_id, month), (tokens, cost))| MonthAdd {
            user_id: user_id.to_owned(),
            month,
            tokens,
            cost,
        })
        .collect();
    rows.daily = daily.into_values().collect();
    rows
}

/// The distinct accounts of a batch, sorted: whose erasure markers to read.
pub fn accounts(records: &[LegRecord]) -> Vec<String> {
    let mut users: Vec<String> = records.iter().map(|r| r.user_id.clone()).collect();
    users.sort_unstable();
    users.dedup();
    users
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(user: &str, request: &str, at: i64, model: &str, tokens: (i64, i64)) -> LegRecord {
        LegRecord {
            user_id: user.into(),
            request_id: request.into(),
            at,
            route: crate::domain::Door::Agent,
            model: model.into(),
            provider: "p".into(),
            project_id: None,
            status: "ok",
            input_tokens: tokens.0,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
            output_tokens: tokens.1,
            reasoning_tokens: 0,
            ttfb_ms: 0,
            duration_ms: 1_000,
            cost_usd: None,
            reservation: Some(format!("res-{request}")),
            estimated: false,
            server_tool_uses: 0,
        }
    }

    #[test]
    fn a_batch_sums_each_month_and_day_once() {
        let day = 20_000 * 86_400;
        let mut priced = record("a", "3", day + 10, "m", (5, 5));
        priced.cost_usd = Some(0.5);
        let records = [
            record("a", "1", day, "m", (10, 1)),
            record("b", "2", day, "m", (7, 0)),
            priced,
            record("a", "4", day + 86_400, "m", (i64::MAX, 1)),
        ];
        let rows = batch_rows(&records, |_| None);
        assert_eq!(rows.legs.len(), 4);
        assert_eq!(rows.settled, ["res-1", "res-2", "res-3", "res-4"]);
        let months: Vec<_> = rows
            .months
            .iter()
            .map(|m| (m.user_id.as_str(), m.tokens))
            .collect();
        // Record 4's input is clamped to the ledger's maximum before it is counted.
        assert_eq!(
            months,
            [
                ("a", 10 + 1 + 5 + 5 + crate::store::usage::MAX_TOKENS + 1),
                ("b", 7)
            ]
        );
        let days: Vec<_> = rows
            .daily
            .iter()
            .map(|d| (d.user_id.as_str(), d.day, d.legs, d.input, d.cost))
            .collect();
        assert_eq!(
            days,
            [
                ("a", 20_000, 2, 15, Some(0.5)),
                ("a", 20_001, 1, crate::store::usage::MAX_TOKENS, None),
                ("b", 20_000, 1, 7, None),
            ]
        );
    }

    #[test]
    fn an_erasure_drops_the_records_of_legs_started_before_it() {
        let at = 20_000 * 86_400;
        // Each leg ran for a second: it started at `at - 1` s.
        let started = (at - 1) * 1000;
        let records = [
            record("erased", "old", at, "m", (10, 0)),
            record("deleted", "gone", at, "m", (10, 0)),
            record("later", "new", at, "m", (10, 0)),
        ];
        let rows = batch_rows(&records, |user| match user {
            "erased" => Some(Erasure {
                erased_at: started,
                counters: false,
            }),
            "deleted" => Some(Erasure {
                erased_at: started + 5,
                counters: true,
            }),
            // Erased before this leg started: it is kept.
            _ => Some(Erasure {
                erased_at: started - 1,
                counters: true,
            }),
        });
        assert_eq!(rows.dropped, ["old", "gone"]);
        assert_eq!(rows.legs.len(), 1);
        assert_eq!(rows.daily.len(), 1);
        // Memory erasure keeps the month count; an account's deletion drops it.
        let months: Vec<_> = rows.months.iter().map(|m| m.user_id.as_str()).collect();
        assert_eq!(months, ["erased", "later"]);
        assert_eq!(rows.settled.len(), 3, "every reservation is settled");
        assert_eq!(accounts(&records), ["deleted", "erased", "later"]);
    }
}
