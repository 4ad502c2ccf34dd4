//! The two exposition formats `/metrics` speaks, chosen from `Accept` the way Prometheus's own
//! client libraries choose: OpenMetrics 1.0 when the scraper asks for it at least as much as for
//! plain text (Prometheus does), otherwise the Prometheus text format 0.0.4 (curl, `promtool`).
//!
//! prometheus-client writes only OpenMetrics; the 0.0.4 body is derived from it. The two differ
//! only in how a counter family is named (OpenMetrics declares `x` and samples `x_total`; 0.0.4
//! declares `x_total`), in `# UNIT` lines, `unknown` spelled `untyped`, and the closing `# EOF`.

use std::collections::HashSet;

pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether the `Accept` header prefers OpenMetrics to plain text.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let (mut openmetrics, mut text) = (0.0_f32, 0.0_f32);
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.strip_prefix("q="))
            .find_map(|q| q.parse::<f32>().ok())
            .unwrap_or(1.0);
        match media.as_str() {
            "application/openmetrics-text" => openmetrics = openmetrics.max(q),
            "text/plain" => text = text.max(q),
            _ => {}
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

/// Rewrites an OpenMetrics exposition as Prometheus text format 0.0.4.
pub fn to_text_004(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, kind)| *kind == "counter")
        .map(|(name, _)| name)
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?.split_once(' ')?)));
        match descriptor {
            Some((p, (name, rest))) => {
                let suffix = if counters.contains(name) {
                    "_total"
                } else {
                    ""
                };
                let rest = if p == "# TYPE " && rest == "unknown" {
                    "untyped"
                } else {
                    rest
                };
                out.push_str(&format!("{p}{name}{suffix} {rest}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_scrapes_get_openmetrics_and_curl_gets_text() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wants_openmetrics(Some(prometheus)));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some("text/plain;version=0.0.4")));
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text;q=0.2, text/plain"
        )));
        assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
    }

    #[test]
    fn counters_are_declared_with_their_sample_name() {
        let om = "# HELP x Things.\n# TYPE x counter\nx_total{a=\"b\"} 1\n# HELP d Secs.\n# TYPE d_seconds gauge\n# UNIT d_seconds seconds\nd_seconds 2\n# TYPE u unknown\nu 1\n# EOF\n";
        assert_eq!(
            to_text_004(om),
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"b\"} 1\n# HELP d Secs.\n# TYPE d_seconds gauge\nd_seconds 2\n# TYPE u untyped\nu 1\n"
        );
    }
}
