//! The PostgreSQL rows of the table: Relay's highest held leg rate and CPU per leg with its
//! stores on PostgreSQL, beside SQLite's from the same run. PostgreSQL's own backends work outside
//! Relay's process, so their CPU is added to Relay's before comparing (SQLite's work is inside
//! Relay's figure); the target is within 1.5× of SQLite's CPU per leg at the highest rate held.

use super::format::{Table, ms, ratio};
use super::{MaxRate, Report};

/// The CPU-per-leg target: PostgreSQL's at most this many times SQLite's.
pub const PG_CPU_RATIO_TARGET: f64 = 1.5;

/// "total (Relay a + PostgreSQL b)" and the total.
fn cpu_cell(relay: f64, db: Option<f64>) -> (String, f64) {
    match db {
        Some(db) => (
            format!("{:.3} (Relay {relay:.3} + PostgreSQL {db:.3})", relay + db),
            relay + db,
        ),
        None => (format!("{relay:.3} (Relay only)"), relay),
    }
}

fn max_cell(m: &MaxRate) -> String {
    if m.top_of_search {
        format!("≥ {}", m.rate)
    } else {
        m.rate.to_string()
    }
}

impl Report {
    /// PostgreSQL's CPU per leg (Relay + its backends) ÷ SQLite's, at each one's highest held rate.
    pub fn postgres_cpu_ratio(&self) -> Option<f64> {
        let pg = self.postgres.as_ref()?;
        let (_, total) = cpu_cell(pg.max.cpu_ms_per_leg?, pg.max.db_cpu_ms_per_leg);
        let sqlite = self.relay_max.cpu_ms_per_leg?;
        (sqlite > 0.0).then(|| total / sqlite)
    }

    pub(super) fn postgres_rows(&self, t: &mut Table) {
        let Some(pg) = &self.postgres else {
            return;
        };
        let sqlite_rate = self.relay_max.rate;
        t.row(
            &format!(
                "PostgreSQL ({}): highest leg rate held with p99 < 50 ms (legs/s)",
                pg.server
            ),
            &format!(
                "{}; SQLite's: {}{}",
                max_cell(&pg.max),
                max_cell(&self.relay_max),
                if sqlite_rate > 0 {
                    format!(" ({:.2}×)", f64::from(pg.max.rate) / f64::from(sqlite_rate))
                } else {
                    String::new()
                }
            ),
            "",
            "",
            "",
            "",
            "new row",
            None,
        );
        let ratio_text = self
            .postgres_cpu_ratio()
            .map(|r| format!("; {r:.2}× SQLite's"))
            .unwrap_or_default();
        t.row(
            "PostgreSQL: CPU per leg at that rate, Relay + its PostgreSQL backends (ms of CPU)",
            &pg.max
                .cpu_ms_per_leg
                .map(|c| format!("{}{ratio_text}", cpu_cell(c, pg.max.db_cpu_ms_per_leg).0))
                .unwrap_or_default(),
            "",
            "",
            "",
            "",
            "≤ 1.5× SQLite's CPU per leg",
            self.postgres_cpu_ratio().map(|r| r <= PG_CPU_RATIO_TARGET),
        );
        let (cell, total) = cpu_cell(pg.cpu_ms_per_leg_at_rate, pg.db_cpu_ms_per_leg_at_rate);
        let sqlite_same = self
            .rates
            .iter()
            .find(|r| r.rate == pg.rate)
            .map(|r| format!("; {} × SQLite's", ratio(total, r.relay_cpu_ms_per_leg)))
            .unwrap_or_default();
        t.row(
            &format!(
                "PostgreSQL: at {} legs/s, p50 / p99 (ms) and CPU per leg, Relay + its PostgreSQL backends (ms of CPU)",
                pg.rate
            ),
            &format!(
                "{} / {}; {cell}{sqlite_same}",
                ms(pg.at_rate.p50_ms),
                ms(pg.at_rate.p99_ms)
            ),
            "",
            "",
            "",
            "",
            "",
            None,
        );
    }
}
