//! The rows of issues 32 and 35: the prompt-cache share and input bill through Relay beside the
//! same session sent directly; CPU per leg with the usage ledger on beside off; `GET /v1/usage`
//! over a filled store.

use super::Report;
use super::format::{Table, ms, ratio};

/// Cache share through Relay at least this share of direct's; input bill at most this ratio.
pub const CACHE_SHARE_TARGET: f64 = 0.95;
pub const BILL_TARGET: f64 = 1.05;
/// CPU per leg with the ledger on at most this many times off.
pub const LEDGER_TARGET: f64 = 1.10;
/// `GET /v1/usage` p99 over a million records.
pub const USAGE_P99_TARGET_MS: f64 = 100.0;

impl Report {
    /// The stages of these rows that produced no numbers.
    pub(super) fn issue_32_35_missing(&self, missing: &mut Vec<&'static str>) {
        if self.cache.is_empty() || self.cache.iter().any(|c| c.direct.read == 0) {
            missing.push("prompt cache");
        }
        if self
            .ledger
            .as_ref()
            .is_none_or(|l| l.on.rounds.is_empty() || l.off.rounds.is_empty())
        {
            missing.push("usage ledger on/off");
        }
        if self.usage_query.as_ref().is_none_or(|u| u.by.is_empty()) {
            missing.push("usage query");
        }
    }

    pub(super) fn cache_rows(&self, t: &mut Table) {
        for c in &self.cache {
            let what = format!(
                "Prompt-cache share, {}-leg tool session, {}{}",
                crate::run::CACHE_LEGS,
                c.door,
                if c.notes { ", notes injected" } else { "" }
            );
            t.row(
                &what,
                &format!("{:.3}", c.relay.share()),
                &format!("{:.3}", c.direct.share()),
                "",
                &ratio(c.relay.share(), c.direct.share()),
                "",
                "≥ 0.95 × direct",
                Some(c.share_ratio() >= CACHE_SHARE_TARGET),
            );
            t.row(
                &format!("{what}: input bill (× input price per prompt token)"),
                &format!("{:.3}", c.relay.bill() / c.relay.total.max(1) as f64),
                &format!("{:.3}", c.direct.bill() / c.direct.total.max(1) as f64),
                "",
                &ratio(c.relay.bill(), c.direct.bill()),
                "",
                "Relay ÷ direct ≤ 1.05",
                Some(c.bill_ratio() <= BILL_TARGET),
            );
        }
    }

    pub(super) fn usage_rows(&self, t: &mut Table) {
        if let Some(l) = &self.ledger {
            let (on, off) = (l.on.cpu_ms_per_leg(), l.off.cpu_ms_per_leg());
            t.row(
                &format!(
                    "CPU per leg at {} legs/s, usage ledger on (ms of CPU; {} × {:.0} s alternating)",
                    l.rate,
                    l.on.rounds.len(),
                    l.secs
                ),
                &format!("{on:.3}"),
                "",
                "",
                "",
                "",
                "",
                None,
            );
            t.row(
                &format!(
                    "CPU per leg at {} legs/s, usage ledger off (ms of CPU)",
                    l.rate
                ),
                &format!("{off:.3}"),
                "",
                "",
                &format!("on ÷ off {}", ratio(on, off)),
                "",
                "on ≤ 1.10 × off",
                Some(on <= LEDGER_TARGET * off),
            );
        }
        if let Some(u) = &self.usage_query {
            for (group_by, p50, p99, rows) in &u.by {
                t.row(
                    &format!(
                        "GET /v1/usage?group_by={group_by} over {} records (30 days, {rows} rows), p50 / p99 of {} calls (ms)",
                        u.records, u.calls
                    ),
                    &format!("{} / {}", ms(*p50), ms(*p99)),
                    "",
                    "",
                    "",
                    "",
                    "p99 ≤ 100 ms at 1,000,000",
                    (u.records >= 1_000_000).then_some(*p99 <= USAGE_P99_TARGET_MS),
                );
            }
        }
    }
}
