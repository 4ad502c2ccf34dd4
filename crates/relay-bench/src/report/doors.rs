//! The rows of issue 39: Claude Code-sized calls through `/v1/messages` beside the bare proxy
//! forwarding the same bytes, and the usage ledger's cost to a leg's p99 and to the highest
//! rate held.

use super::Report;
use super::format::{Table, ms, ratio};

/// Relay's CPU per same-family call at most this many times the bare proxy's; a translated one.
pub const SAME_FAMILY_CPU: f64 = 1.5;
pub const TRANSLATED_CPU: f64 = 3.0;
/// With the ledger on: p99 at the target rate at most this many times off, and at most 2 ms.
pub const LEDGER_P99_RATIO: f64 = 1.2;
pub const LEDGER_P99_MS: f64 = 2.0;
/// The highest rate held with the ledger on, SQLite.
pub const LEDGER_MAX_RATE: u32 = 6_000;

impl Report {
    /// The stages of these rows that produced no numbers.
    pub(super) fn issue_39_missing(&self, missing: &mut Vec<&'static str>) {
        if self.doors.is_empty() || self.doors.iter().any(|d| d.relay.calls == 0) {
            missing.push("door rows");
        }
    }

    pub(super) fn door_rows(&self, t: &mut Table) {
        for d in &self.doors {
            let kb = d.body_bytes / 1000;
            let (p50, p99) = d.added();
            let (floor50, floor99) = d.floor_added();
            let same = d.kind == "same family";
            if same {
                // Issue 39: ≤ 0.3 ms at the recorded size, ≤ 1 ms at 1 MB; p99 ≤ 2 × p50.
                let p50_target = match d.body_bytes {
                    0..=150_000 => Some(0.3),
                    900_000.. => Some(1.0),
                    _ => None,
                };
                t.row(
                    &format!(
                        "`/v1/messages`, Claude Code body of {kb} KB → anthropic, concurrency 1: added latency p50 / p99 (ms); bare proxy's in the LiteLLM column"
                    ),
                    &format!("{} / {}", ms(p50), ms(p99)),
                    &format!("{} / {}", ms(d.direct.p50_ms), ms(d.direct.p99_ms)),
                    &format!("bare proxy: {} / {}", ms(floor50), ms(floor99)),
                    "",
                    "",
                    &match p50_target {
                        Some(t) => format!("p50 ≤ {t} ms, p99 ≤ 2 × p50"),
                        None => "p99 ≤ 2 × p50".into(),
                    },
                    Some(p50_target.is_none_or(|t| p50 <= t) && p99 <= 2.0 * p50.max(0.0)),
                );
            }
            let limit = if same {
                SAME_FAMILY_CPU
            } else {
                TRANSLATED_CPU
            };
            let (relay_cpu, floor_cpu) = (
                d.relay.cpu_ms_per_call.unwrap_or(f64::NAN),
                d.floor.cpu_ms_per_call.unwrap_or(f64::NAN),
            );
            t.row(
                &format!(
                    "`/v1/messages`, {kb} KB, {}: CPU per call, Relay (bare proxy in the LiteLLM column; ms of CPU, {} calls)",
                    d.kind, d.relay.calls
                ),
                &format!("{relay_cpu:.3}"),
                "",
                &format!("bare proxy: {floor_cpu:.3}"),
                "",
                &format!("Relay ÷ bare proxy {}", ratio(relay_cpu, floor_cpu)),
                &format!("≤ {limit} × the bare proxy's"),
                Some(relay_cpu <= limit * floor_cpu),
            );
        }
    }

    pub(super) fn ledger_rows(&self, t: &mut Table) {
        let Some(l) = &self.ledger else { return };
        let (on, off) = (l.on.p99_ms(), l.off.p99_ms());
        t.row(
            &format!(
                "p99 at {} legs/s, usage ledger on / off (ms; median of {} alternating runs of {:.0} s)",
                l.rate,
                l.on.rounds.len(),
                l.secs
            ),
            &format!("{} / {}", ms(on), ms(off)),
            "",
            "",
            &format!("on ÷ off {}", ratio(on, off)),
            "",
            "on ≤ 1.2 × off and ≤ 2 ms",
            Some(on <= LEDGER_P99_RATIO * off && on <= LEDGER_P99_MS),
        );
        if let (Some(max_on), Some(max_off)) = (&l.max_on, &l.max_off) {
            t.row(
                "Highest leg rate held with p99 < 50 ms, usage ledger on / off (legs/s)",
                &format!(
                    "{}{} / {}{}",
                    max_on.rate,
                    if max_on.top_of_search { "+" } else { "" },
                    max_off.rate,
                    if max_off.top_of_search { "+" } else { "" }
                ),
                "",
                "",
                &format!(
                    "on ÷ off {}",
                    ratio(f64::from(max_on.rate), f64::from(max_off.rate))
                ),
                "",
                "on ≥ 6,000 legs/s (SQLite)",
                Some(max_on.rate >= LEDGER_MAX_RATE),
            );
        }
    }
}
