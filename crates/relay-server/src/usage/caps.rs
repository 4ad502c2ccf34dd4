//! An account's caps (its unit quota, monthly token budget and monthly spend budget) and its
//! standing against the fullest of them, in the forms Claude Code reads from a gateway it signed
//! in to: the `anthropic-ratelimit-unified-*` headers of each Messages answer, the same headers
//! on the 429 `billing_error` once a cap is reached, and `GET /api/oauth/usage` (issue 40).

use serde_json::{Value, json};

use super::budget::Budget;
use crate::store::User;

/// What a cap counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapKind {
    Units,
    Tokens,
    Spend,
}

impl CapKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Units => "units",
            Self::Tokens => "tokens",
            Self::Spend => "spend",
        }
    }
}

/// One cap and what was used of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cap {
    pub kind: CapKind,
    pub used: f64,
    pub limit: f64,
    /// Unix seconds of the next reset; `None` for a unit quota that never resets.
    pub resets_at: Option<i64>,
}

impl Cap {
    /// The share used: 1 or more once reached (a cap of 0 is reached at once).
    pub fn utilization(&self) -> f64 {
        if self.limit <= 0.0 {
            1.0
        } else {
            self.used / self.limit
        }
    }
}

/// The thresholds past which Claude Code shows its usage notice.
const THRESHOLDS: [f64; 2] = [0.95, 0.75];

/// An account's caps; empty for an account without any (admins' units, unlimited budgets).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Caps(pub Vec<Cap>);

impl Caps {
    /// `user`'s caps given its budgets this month; `month_end` is the start of the next month
    /// (Unix seconds), when budgets reset, and when a monthly unit quota resets
    /// (`units_reset`, `None` for a lifetime count).
    pub fn of(user: &User, budget: &Budget, month_end: i64, units_reset: Option<i64>) -> Self {
        let mut caps = Vec::new();
        if !user.unlimited() {
            #[allow(clippy::cast_precision_loss, reason = "counts far below 2^52")]
            caps.push(Cap {
                kind: CapKind::Units,
                used: user.used as f64,
                limit: user.limit as f64,
                resets_at: units_reset,
            });
        }
        if budget.token_budget >= 0 {
            #[allow(clippy::cast_precision_loss, reason = "counts far below 2^52")]
            caps.push(Cap {
                kind: CapKind::Tokens,
                used: budget.tokens_used as f64,
                limit: budget.token_budget as f64,
                resets_at: Some(month_end),
            });
        }
        if budget.spend_budget_usd >= 0.0 {
            caps.push(Cap {
                kind: CapKind::Spend,
                used: budget.spend_used_usd,
                limit: budget.spend_budget_usd,
                resets_at: Some(month_end),
            });
        }
        Self(caps)
    }

    /// The cap the headers describe: the fullest one (the first of equals: units, tokens, spend).
    pub fn fullest(&self) -> Option<&Cap> {
        self.0
            .iter()
            .fold(None, |best: Option<&Cap>, cap| match best {
                Some(b) if b.utilization() >= cap.utilization() => Some(b),
                _ => Some(cap),
            })
    }

    /// The headers of a successful Messages answer; none for an account without a cap.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let Some(cap) = self.fullest() else {
            return Vec::new();
        };
        let used = cap.utilization();
        let passed = THRESHOLDS.iter().find(|t| used >= **t);
        let status = if passed.is_some() {
            "allowed_warning"
        } else {
            "allowed"
        };
        let mut headers = vec![
            ("anthropic-ratelimit-unified-status", status.to_owned()),
            (
                "anthropic-ratelimit-unified-representative-claim",
                "overage".to_owned(),
            ),
            (
                "anthropic-ratelimit-unified-overage-status",
                status.to_owned(),
            ),
            // Kept below 1 while calls are still allowed.
            (
                "anthropic-ratelimit-unified-overage-utilization",
                format!("{:.2}", ((used.max(0.0) * 100.0).round() / 100.0).min(0.99)),
            ),
        ];
        if let Some(threshold) = passed {
            headers.push((
                "anthropic-ratelimit-unified-overage-surpassed-threshold",
                format!("{threshold:.2}"),
            ));
        }
        if let Some(at) = cap.resets_at {
            headers.push(("anthropic-ratelimit-unified-reset", at.to_string()));
            headers.push(("anthropic-ratelimit-unified-overage-reset", at.to_string()));
        }
        headers
    }

    /// When the 429's cap resets: the reached cap that resets last, else the fullest one's.
    pub fn rejected_reset(&self) -> Option<i64> {
        let reached = self
            .0
            .iter()
            .filter(|c| c.utilization() >= 1.0)
            .max_by_key(|c| c.resets_at.unwrap_or(i64::MAX));
        reached.or_else(|| self.fullest()).and_then(|c| c.resets_at)
    }

    /// The headers of the 429 once a cap is reached, reset as `rejected_reset` (no
    /// `representative-claim` or `overage-status`, so that the client prints Relay's message).
    pub fn rejected_headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("anthropic-ratelimit-unified-status", "rejected".to_owned()),
            (
                "anthropic-ratelimit-unified-overage-utilization",
                "1".to_owned(),
            ),
            (
                "anthropic-ratelimit-unified-overage-surpassed-threshold",
                "1".to_owned(),
            ),
            (
                "anthropic-ratelimit-unified-overage-period",
                "monthly".to_owned(),
            ),
            (
                "anthropic-ratelimit-unified-overage-disabled-reason",
                "org_spend_cap_reached".to_owned(),
            ),
        ];
        if let Some(at) = self.rejected_reset() {
            headers.push(("anthropic-ratelimit-unified-reset", at.to_string()));
            headers.push(("anthropic-ratelimit-unified-overage-reset", at.to_string()));
        }
        headers
    }

    /// `GET /api/oauth/usage`: the spend in cents in `extra_usage` (with the spend cap when
    /// there is one), one `limits` row per cap, `is_active` on the spend row (else the fullest),
    /// and the day's and week's spend only for an account without any cap.
    /// `spend` is (this month, today, this week from Monday) in USD.
    pub fn usage_body(&self, spend: (f64, f64, f64)) -> Value {
        let (month, day, week) = spend;
        let spend_cap = self.0.iter().find(|c| c.kind == CapKind::Spend);
        let active = spend_cap.or_else(|| self.fullest()).map(|c| c.kind);
        let limits: Vec<Value> = self
            .0
            .iter()
            .map(|cap| {
                let percent = percent(cap.utilization());
                json!({
                    "kind": cap.kind.as_str(),
                    "group": "monthly",
                    "percent": percent,
                    "resets_at": cap.resets_at.map(iso_millis),
                    "severity": severity(cap.utilization()),
                    "is_active": Some(cap.kind) == active,
                })
            })
            .collect();
        let mut extra = json!({
            "is_enabled": true,
            "monthly_limit": spend_cap.map(|c| cents(c.limit)),
            "used_credits": cents(month),
            "utilization": spend_cap.map(|c| percent(c.utilization())),
            "currency": "USD",
        });
        // `daily` and `weekly` mean "no cap" to Claude Code (it then shows amounts and no percent):
        // only without any cap. With a unit or token cap alone, `monthly_limit` and `utilization`
        // stay null and Claude Code shows the percent of the headers.
        if self.0.is_empty() {
            extra["daily"] =
                json!({"limit": null, "used_credits": cents(day), "utilization": null});
            extra["weekly"] =
                json!({"limit": null, "used_credits": cents(week), "utilization": null});
        }
        json!({"extra_usage": extra, "limits": limits})
    }
}

/// Whole cents.
fn cents(usd: f64) -> i64 {
    #[allow(
        clippy::cast_possible_truncation,
        reason = "amounts far below 2^63 cents"
    )]
    let c = (usd * 100.0).round() as i64;
    c
}

/// A share as a whole percent (above 100 once over).
fn percent(share: f64) -> i64 {
    #[allow(clippy::cast_possible_truncation, reason = "a percent")]
    let p = (share.max(0.0) * 100.0).floor() as i64;
    p
}

fn severity(share: f64) -> &'static str {
    if share >= 0.95 {
        "critical"
    } else if share >= 0.75 {
        "warning"
    } else {
        "normal"
    }
}

/// Unix seconds as an ISO 8601 UTC time with milliseconds (`2026-12-01T00:00:00.000Z`).
pub fn iso_millis(secs: i64) -> String {
    let (y, m, d) = crate::store::usage::civil_from_days(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.000Z",
        t / 3600,
        t % 3600 / 60,
        t % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;

    fn user(limit: i64, used: i64) -> User {
        User {
            id: "u".into(),
            email: "a@example.com".into(),
            role: Role::User,
            limit,
            used,
            created_at: 0.0,
            allowed_models: None,
        }
    }

    fn budget(tokens: (i64, i64), spend: (f64, f64)) -> Budget {
        Budget {
            token_budget: tokens.0,
            tokens_used: tokens.1,
            spend_budget_usd: spend.0,
            spend_used_usd: spend.1,
        }
    }

    fn header<'a>(h: &'a [(&str, String)], name: &str) -> Option<&'a str> {
        h.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn no_cap_no_headers_and_the_fullest_cap_speaks() {
        let none = Caps::of(&user(-1, 5), &Budget::UNLIMITED, 100, Some(100));
        assert!(none.headers().is_empty());
        // Units at 50 %, spend at 82 %: spend is described, past the 75 % threshold.
        let caps = Caps::of(
            &user(10, 5),
            &budget((-1, 0), (50.0, 41.0)),
            1_800,
            Some(1_800),
        );
        let h = caps.headers();
        assert_eq!(
            header(&h, "anthropic-ratelimit-unified-status"),
            Some("allowed_warning")
        );
        assert_eq!(
            header(&h, "anthropic-ratelimit-unified-overage-utilization"),
            Some("0.82")
        );
        assert_eq!(
            header(
                &h,
                "anthropic-ratelimit-unified-overage-surpassed-threshold"
            ),
            Some("0.75")
        );
        assert_eq!(
            header(&h, "anthropic-ratelimit-unified-reset"),
            Some("1800")
        );
        assert_eq!(
            header(&h, "anthropic-ratelimit-unified-representative-claim"),
            Some("overage")
        );
        // Below 75 %: allowed, no threshold.
        let low = Caps::of(&user(10, 5), &Budget::UNLIMITED, 1_800, Some(1_800)).headers();
        assert_eq!(
            header(&low, "anthropic-ratelimit-unified-status"),
            Some("allowed")
        );
        assert_eq!(
            header(
                &low,
                "anthropic-ratelimit-unified-overage-surpassed-threshold"
            ),
            None
        );
        // Past 95 % and even at 100 % while still allowed, utilization stays below 1.
        let full = Caps::of(&user(100, 100), &Budget::UNLIMITED, 9, Some(9)).headers();
        assert_eq!(
            header(&full, "anthropic-ratelimit-unified-overage-utilization"),
            Some("0.99")
        );
        assert_eq!(
            header(
                &full,
                "anthropic-ratelimit-unified-overage-surpassed-threshold"
            ),
            Some("0.95")
        );
    }

    #[test]
    fn the_usage_body_is_in_cents_and_whole_percents_and_matches_the_reset() {
        let caps = Caps::of(
            &user(-1, 0),
            &budget((-1, 0), (500.0, 271.4)),
            1_790_812_800,
            None,
        );
        let body = caps.usage_body((271.4, 12.4, 40.0));
        assert_eq!(body["extra_usage"]["monthly_limit"], 50_000);
        assert_eq!(body["extra_usage"]["used_credits"], 27_140);
        assert_eq!(body["extra_usage"]["utilization"], 54);
        assert_eq!(body["limits"][0]["kind"], "spend");
        assert_eq!(body["limits"][0]["is_active"], true);
        assert_eq!(body["limits"][0]["resets_at"], iso_millis(1_790_812_800));
        // No cap: no limits, the spend of the month, day and week.
        let none = Caps::default().usage_body((12.4, 1.0, 3.5));
        assert_eq!(none["limits"], json!([]));
        assert_eq!(none["extra_usage"]["monthly_limit"], Value::Null);
        assert_eq!(none["extra_usage"]["daily"]["used_credits"], 100);
        assert_eq!(none["extra_usage"]["weekly"]["used_credits"], 350);
        // A unit quota alone: its row, and no amounts that would say "no cap".
        let units = Caps::of(
            &user(10, 8),
            &budget((-1, 0), (-1.0, 0.0)),
            1_790_812_800,
            None,
        )
        .usage_body((0.0, 0.0, 0.0));
        assert_eq!(units["limits"][0]["kind"], "units");
        assert_eq!(units["limits"][0]["percent"], 80);
        assert_eq!(units["extra_usage"]["monthly_limit"], Value::Null);
        assert!(units["extra_usage"].get("daily").is_none(), "{units}");
        assert!(units["extra_usage"].get("weekly").is_none(), "{units}");
        assert_eq!(iso_millis(1_790_812_800), "2026-10-01T00:00:00.000Z");
    }
}
