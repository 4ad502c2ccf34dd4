//! Cell formatting for the report's markdown: milliseconds, p50/p90/p99 triples, ratios, met
//! marks, and the row-at-a-time table builder.

use std::fmt::Write as _;

use crate::load::LoadResult;

pub(super) fn ms(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub(super) fn triple(r: &LoadResult) -> String {
    let mut s = format!("{} / {} / {}", ms(r.p50_ms), ms(r.p90_ms), ms(r.p99_ms));
    if r.requests > 0 && r.success_ratio() < 0.999 {
        let _ = write!(s, " ({:.1} % ok)", r.success_ratio() * 100.0);
    }
    s
}

pub(super) fn ratio(a: f64, b: f64) -> String {
    if a.is_nan() || b.is_nan() || b <= 0.0 {
        "–".into()
    } else {
        format!("{:.2}", a / b)
    }
}

pub(super) fn ratios(a: &LoadResult, b: &LoadResult) -> String {
    format!(
        "{} / {} / {}",
        ratio(a.p50_ms, b.p50_ms),
        ratio(a.p90_ms, b.p90_ms),
        ratio(a.p99_ms, b.p99_ms)
    )
}

fn met(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "n/a",
    }
}

/// KB and MB are decimal (1,000 and 1,000,000 bytes): the stricter reading of the targets.
pub(super) fn mb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e6
}

pub(super) struct Table(pub(super) String);

impl Table {
    pub(super) fn new() -> Self {
        Self(String::from(
            "| Figure | Relay | Direct to mock | LiteLLM | Relay ÷ direct | Relay ÷ LiteLLM | Target | Met |\n\
             |---|---|---|---|---|---|---|---|\n",
        ))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn row(
        &mut self,
        figure: &str,
        relay: &str,
        direct: &str,
        litellm: &str,
        r_d: &str,
        r_l: &str,
        target: &str,
        ok: Option<bool>,
    ) {
        let cell = |s: &str| {
            if s.is_empty() {
                "–".to_owned()
            } else {
                s.to_owned()
            }
        };
        let _ = writeln!(
            self.0,
            "| {figure} | {} | {} | {} | {} | {} | {} | {} |",
            cell(relay),
            cell(direct),
            cell(litellm),
            cell(r_d),
            cell(r_l),
            cell(target),
            met(ok)
        );
    }
}
