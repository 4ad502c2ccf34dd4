//! The period an account's unit quota counts (`[auth] quota_period`, issue 42) and the month
//! boundaries `/v1/me` reports. `month` counts the current calendar month (UTC), as token budgets
//! do; `never` keeps a lifetime count until an operator resets it.
//!
//! The month's count lives in `users.used` beside the month it belongs to (`used_month`). The
//! statement that takes a unit stays as it was (one conditional `UPDATE`, batched): instead, the
//! first admission or read of an instance in a new month sets every account's count of an earlier
//! month back to 0, in one statement that only moves forward, so instances may race on it.

use std::sync::atomic::{AtomicI64, Ordering};

use relay_wire::ErrorCode;

use crate::config::QuotaPeriod;
use crate::error::ApiError;
use crate::store::usage::{civil_from_days, month_of};
use crate::store::{AuthStore, StoreResult};

/// The first second of the calendar month (UTC) after the one `at` falls in.
pub fn next_month_start(at: i64) -> i64 {
    let (y, m, _) = civil_from_days(at.div_euclid(86_400));
    let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    days_from_civil(y, m, 1) * 86_400
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm, the inverse of
/// `civil_from_days`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A Unix time as RFC 3339 in UTC, to the second (`2026-12-01T00:00:00Z`).
pub fn rfc3339(at: i64) -> String {
    let (y, m, d) = civil_from_days(at.div_euclid(86_400));
    let s = at.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// The quota's period for one instance, and the month it last set counts back in.
#[derive(Debug)]
pub struct QuotaMonth {
    period: QuotaPeriod,
    /// `YYYYMM` of the last roll-over this instance ran (0 before the first).
    rolled: AtomicI64,
}

impl QuotaMonth {
    pub fn new(period: QuotaPeriod) -> Self {
        Self {
            period,
            rolled: AtomicI64::new(0),
        }
    }

    pub fn period(&self) -> QuotaPeriod {
        self.period
    }

    /// When the count next goes back to 0, as RFC 3339; `None` for `never`.
    pub fn resets_at(&self, now: f64) -> Option<String> {
        match self.period {
            QuotaPeriod::Month => Some(rfc3339(next_month_start(now as i64))),
            QuotaPeriod::Never => None,
        }
    }

    /// The refusal of a leg past the quota: the limit, the period and when it resets.
    pub fn exceeded(&self, limit: i64, now: f64) -> ApiError {
        let message = match self.resets_at(now) {
            Some(at) => format!(
                "the account's quota of {limit} legs this month (UTC) is used up; it resets at {at}; ask an operator to raise it"
            ),
            None => format!(
                "the account's quota of {limit} legs is used up; it does not reset by itself ([auth] quota_period = \"never\"); ask an operator to raise or reset it"
            ),
        };
        ApiError::new(ErrorCode::QuotaExceeded, message)
    }

    /// Sets counts of an earlier month back to 0 once `now` is in a month this instance has not
    /// rolled to yet; true when it ran the statement (cached accounts may show an old count).
    pub async fn roll(&self, auth: &dyn AuthStore, now: f64) -> StoreResult<bool> {
        if self.period == QuotaPeriod::Never {
            return Ok(false);
        }
        let month = month_of(now as i64);
        if self.rolled.load(Ordering::Acquire) >= month {
            return Ok(false);
        }
        auth.roll_quota_month(month).await?;
        self.rolled.fetch_max(month, Ordering::AcqRel);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_month_starts_at_midnight_utc() {
        // 2026-11-27T08:00:00Z
        let at = 1_795_737_600 + 8 * 3600;
        assert_eq!(rfc3339(at), "2026-11-27T08:00:00Z");
        assert_eq!(rfc3339(next_month_start(at)), "2026-12-01T00:00:00Z");
        // December rolls into the next year; the last second of a month still belongs to it.
        let december = next_month_start(at) + 10 * 86_400;
        assert_eq!(rfc3339(next_month_start(december)), "2027-01-01T00:00:00Z");
        assert_eq!(
            next_month_start(next_month_start(at) - 1),
            next_month_start(at)
        );
        assert_eq!(month_of(next_month_start(at)), 202_612);
        assert_eq!(days_from_civil(1970, 1, 1), 0);
    }
}
