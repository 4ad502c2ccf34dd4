//! The usage ledger's storage: one row per leg that took a quota unit, the aggregates the usage
//! endpoints answer from, and each account's token count per calendar month (token budgets).

use async_trait::async_trait;

use super::StoreResult;
use crate::domain::Door;

/// A stored route as its door (an unknown one, which only a hand-edited row could hold, as the
/// native route).
pub fn route_of(stored: &str) -> Door {
    Door::parse(stored).unwrap_or_default()
}

/// A stored status as its static string.
pub fn status_of(stored: &str) -> &'static str {
    match stored {
        "ok" => "ok",
        "cancelled" => "cancelled",
        _ => "error",
    }
}

/// One leg as the ledger keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct LegRecord {
    /// The account (`local` in open mode).
    pub user_id: String,
    pub request_id: String,
    /// Unix seconds.
    pub at: i64,
    /// The door the leg came in by.
    pub route: Door,
    pub model: String,
    pub provider: String,
    pub project_id: Option<String>,
    /// `ok`, `error` or `cancelled`.
    pub status: &'static str,
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub cache_write_tokens: i64,
    pub output_tokens: i64,
    pub reasoning_tokens: i64,
    pub ttfb_ms: i64,
    pub duration_ms: i64,
    pub cost_usd: Option<f64>,
    /// The budget reservation the leg held (`Reservation::id`), settled when the record is
    /// written, in the same transaction that counts its tokens.
    pub reservation: Option<String>,
    /// The tokens are Relay's estimate (the provider's count never arrived), not the provider's.
    pub estimated: bool,
    /// Tools the provider ran itself for the call (web searches, code runs), billed apart.
    pub server_tool_uses: i64,
}

/// Tokens (and spend) a leg holds against its account's monthly budgets from admission to its
/// record.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub id: String,
    pub user_id: String,
    /// `YYYYMM`.
    pub month: i64,
    pub tokens: i64,
    /// USD: the call's priced estimate (0 when no model of its chain has a price).
    pub cost_usd: f64,
    /// Unix seconds after which the row no longer counts (its leg cannot still be running).
    pub expires_at: i64,
}

/// One account's budgets this month, as admission reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MonthState {
    /// The account's own token budget; `None` follows the default.
    pub own_budget: Option<i64>,
    /// Tokens the written records counted.
    pub used: i64,
    /// Tokens live reservations hold.
    pub reserved: i64,
    /// The account's own spend budget in USD; `None` follows the default.
    pub own_spend_budget: Option<f64>,
    /// USD the written records cost.
    pub spent: f64,
    /// USD live reservations hold.
    pub reserved_usd: f64,
}

/// The budgets a reservation must fit in, each `-1` (or below 0) when unlimited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budgets {
    pub tokens: i64,
    pub spend_usd: f64,
}

impl Budgets {
    /// A token budget alone.
    pub fn tokens(tokens: i64) -> Self {
        Self {
            tokens,
            spend_usd: -1.0,
        }
    }
}

/// The most tokens one figure of one record may hold (a billion: far above any context window or
/// output a model has). A provider's figure above it is clamped when the record is made and again
/// when it is written, so that no sum of the ledger can reach 2^63 (9.2 billion records of the
/// largest figure would be needed) and no one figure a provider sends can break it.
pub const MAX_TOKENS: i64 = 1_000_000_000;

/// A provider's token figure as the ledger keeps it: within `[0, MAX_TOKENS]`.
pub fn clamp_tokens(figure: u64) -> i64 {
    i64::try_from(figure).map_or(MAX_TOKENS, |v| v.min(MAX_TOKENS))
}

/// `SUM`-safe addition in SQL, the same in both dialects: `$cur + $add` held at `i64::MAX`
/// instead of overflowing (SQLite would turn the sum into a float, PostgreSQL refuse the whole
/// transaction). `$add` is never negative: every figure is clamped to `[0, MAX_TOKENS]` first.
macro_rules! saturating_add {
    ($cur:literal, $add:literal) => {
        concat!(
            "CASE WHEN ",
            $cur,
            " > 9223372036854775807 - ",
            $add,
            " THEN 9223372036854775807 ELSE ",
            $cur,
            " + ",
            $add,
            " END"
        )
    };
}
pub(crate) use saturating_add;

/// Now in Unix milliseconds, the erasure markers' clock (the same clock as a record's `at`).
pub fn now_ms() -> i64 {
    #[allow(clippy::cast_possible_truncation, reason = "Unix milliseconds fit i64")]
    let ms = (crate::clock::now() * 1000.0) as i64;
    ms
}

impl LegRecord {
    /// Holds every token figure within `[0, MAX_TOKENS]` (and the cost finite and not negative);
    /// whether one had to be changed.
    pub fn clamp(&mut self) -> bool {
        let mut changed = false;
        for figure in [
            &mut self.input_tokens,
            &mut self.cached_input_tokens,
            &mut self.cache_write_tokens,
            &mut self.output_tokens,
            &mut self.reasoning_tokens,
        ] {
            let held = (*figure).clamp(0, MAX_TOKENS);
            changed |= held != *figure;
            *figure = held;
        }
        if let Some(cost) = self.cost_usd
            && !(cost.is_finite() && cost >= 0.0)
        {
            self.cost_usd = None;
            changed = true;
        }
        changed
    }

    /// When the leg started, in Unix milliseconds: its end less its duration. `at` is whole
    /// seconds, so this is up to a second early, never late (an erasure that came after the leg
    /// started always covers it).
    pub fn started_ms(&self) -> i64 {
        self.at
            .saturating_mul(1000)
            .saturating_sub(self.duration_ms.max(0))
    }

    /// What the leg counts against a token budget: input plus output tokens.
    pub fn budget_tokens(&self) -> i64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// The calendar month (UTC) a record counts in, as `YYYYMM`.
    pub fn month(&self) -> i64 {
        month_of(self.at)
    }
}

/// The calendar month (UTC) of a Unix time, as `YYYYMM` (202611).
pub fn month_of(at: i64) -> i64 {
    let (y, m, _) = civil_from_days(at.div_euclid(86_400));
    y * 100 + m
}

/// The (year, month, day) of a day number counted from 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The day number (from 1970-01-01) of a civil date.
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// What the rows of an aggregate are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Day,
    Model,
    Project,
    User,
}

/// Which records an aggregate covers: one account's or every account's, `[from, to]` in Unix
/// seconds, both included.
#[derive(Debug, Clone)]
pub struct UsageQuery {
    pub user_id: Option<String>,
    pub from: i64,
    pub to: i64,
    pub group_by: GroupBy,
}

/// One row of an aggregate: its key (a day number for `Day`, the model, project (`None` for
/// none) or account id otherwise) and the sums.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageSums {
    pub key: Option<String>,
    pub legs: i64,
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub cache_write_tokens: i64,
    pub output_tokens: i64,
    /// `None` when no leg in the row had a price.
    pub cost_usd: Option<f64>,
}

/// Which records a page of `UsageStore::legs` covers: one account's (or, `None`, every account's),
/// narrowed to one model, status and project when given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LegFilter {
    pub user_id: Option<String>,
    pub model: Option<String>,
    pub status: Option<String>,
    pub project_id: Option<String>,
}

impl LegFilter {
    /// The filter's conditions on `usage_legs`, each `AND column = <placeholder>`, and the values
    /// to bind in that order; `placeholder(n)` spells the n-th bind of the statement (from 1).
    /// Only the columns given appear, so each backend's index on the account still serves.
    pub fn conditions(&self, placeholder: impl Fn(usize) -> String) -> (String, Vec<&str>) {
        let mut sql = String::new();
        let mut values = Vec::new();
        for (column, value) in [
            ("user_id", &self.user_id),
            ("model", &self.model),
            ("status", &self.status),
            ("project_id", &self.project_id),
        ] {
            if let Some(v) = value {
                values.push(v.as_str());
                sql.push_str(&format!(" AND {column} = {}", placeholder(values.len())));
            }
        }
        (sql, values)
    }
}

/// A stored record and the id a page continues after.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredLeg {
    pub id: i64,
    pub record: LegRecord,
}

#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Writes a batch of records, adds each one's tokens to its account's month and its day's
    /// roll-up row and settles its reservation, in one transaction (a few statements per batch,
    /// `usage_rows`). Every figure is clamped (`LegRecord::clamp`) and every sum held below 2^63; a
    /// record of a leg that started at or before its account's erasure is not written.
    async fn insert_legs(&self, records: &[LegRecord]) -> StoreResult<()>;
    /// The sums per key of the records the query covers, in no particular order.
    async fn aggregate(&self, query: &UsageQuery) -> StoreResult<Vec<UsageSums>>;
    /// The records the filter covers, newest first, those with an id below `before` when given.
    async fn legs(
        &self,
        filter: &LegFilter,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<StoredLeg>>;
    /// The account's own budget (`None`: none set) and its tokens in `month`, in one read.
    async fn budget_and_month(&self, user_id: &str, month: i64) -> StoreResult<(Option<i64>, i64)>;
    /// Sets the account's monthly token budget (-1 unlimited).
    async fn set_budget(&self, user_id: &str, token_budget: i64) -> StoreResult<()>;
    /// Sets the account's monthly spend budget in USD (-1 unlimited).
    async fn set_spend_budget(&self, user_id: &str, usd: f64) -> StoreResult<()>;
    /// Deletes an account's records (erasure); the month counts and budget stay unless `counters`.
    /// Leaves a marker, so that a record of a leg that started before now and is written later
    /// (a leg in flight) is dropped by `insert_legs` (and its month count too with `counters`).
    async fn delete_user_legs(&self, user_id: &str, counters: bool) -> StoreResult<u64>;
    /// Deletes records (and erasure markers) older than `before` (Unix seconds).
    async fn prune(&self, before: i64) -> StoreResult<u64>;
    /// The account's own budgets, its tokens and spend in `month` and what its live reservations
    /// (those not expired at `now`) hold, in one read.
    async fn month_state(&self, user_id: &str, month: i64, now: i64) -> StoreResult<MonthState>;
    /// Stores `reservation` if the month's tokens (and spend), the live reservations and it
    /// together stay within each limited budget, atomically across instances; `false` when it
    /// does not fit.
    async fn reserve(
        &self,
        reservation: &Reservation,
        budgets: Budgets,
        now: i64,
    ) -> StoreResult<bool>;
    /// Drops a reservation whose leg left no record.
    async fn release(&self, id: &str) -> StoreResult<()>;
    /// The stored value of a setting, storing `value` first if there is none (every instance
    /// gets the first one stored).
    async fn setting_or_init(&self, key: &str, value: &str) -> StoreResult<String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip_and_months_follow_utc() {
        for day in [-800_000, -1, 0, 59, 365, 11_016, 20_783, 1_000_000] {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
        // 2026-11-30 23:59:59 UTC is November; one second later is December.
        let end = days_from_civil(2026, 12, 1) * 86_400;
        assert_eq!(month_of(end - 1), 202_611);
        assert_eq!(month_of(end), 202_612);
    }
}
