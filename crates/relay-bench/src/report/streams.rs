//! The open-stream rows of the table: Relay's RSS with all legs open and its memory per open
//! stream, once with the mock as a plain HTTP/1.1 server (how local servers such as llama.cpp,
//! Ollama and vLLM serve) and once over HTTPS offering HTTP/2 (how OpenAI, Anthropic and Gemini
//! serve), each beside the bare proxy's figure from the same run.

use super::format::{Table, mb};
use super::{FloorStreams, Report, STREAMS_TARGET};
use crate::streams::StreamsResult;

impl Report {
    pub(super) fn stream_rows(&self, t: &mut Table) {
        self.one_upstream(t, &self.streams, &self.streams_floor, "");
        if let Some(https) = &self.streams_https {
            self.one_upstream(
                t,
                https,
                &self.streams_https_floor,
                ", upstream over HTTPS with HTTP/2",
            );
        }
    }

    fn one_upstream(&self, t: &mut Table, s: &StreamsResult, floor: &[FloorStreams], how: &str) {
        let streams_label = if s.opened < STREAMS_TARGET && !self.smoke {
            format!(
                "{} concurrent open streams{how} (10,000 asked; see note)",
                s.opened
            )
        } else {
            format!("{} concurrent open streams{how}", s.opened)
        };
        // With fewer than 10,000 open, the 10,000 figure is projected from the measured one.
        let projected = (s.opened > 0 && s.opened < STREAMS_TARGET)
            .then(|| mb(s.rss_before_kib) + STREAMS_TARGET as f64 * s.bytes_per_stream / 1e6);
        t.row(
            &format!("{streams_label}: RSS of the whole process (MB)"),
            &match projected {
                Some(p) => format!(
                    "{:.1}; projected to 10,000 open: {p:.1}",
                    mb(s.rss_open_kib)
                ),
                None => format!("{:.1}", mb(s.rss_open_kib)),
            },
            "",
            "",
            "",
            "",
            "≤ 300 MB with 10,000 open",
            (s.opened > 0).then(|| projected.unwrap_or(mb(s.rss_open_kib)) <= 300.0),
        );
        let upstream = if how.is_empty() {
            ", upstream over plain HTTP/1.1".to_owned()
        } else {
            how.to_owned()
        };
        t.row(
            &format!("Memory per open stream{upstream} (KB)"),
            &format!("{:.1}", s.bytes_per_stream / 1000.0),
            "",
            "",
            "",
            "",
            "≤ 24 KB",
            (s.opened > 0).then_some(s.bytes_per_stream <= 24_000.0),
        );
        // The floor: what the two connections of a leg cost with nothing of Relay between them.
        for f in floor {
            t.row(
                &format!(
                    "Baseline: memory per open stream of a bare proxy, Relay's connection server and {}{how}, nothing else; {} open (KB)",
                    f.client.describe(),
                    f.result.opened
                ),
                &format!("{:.1}", f.result.bytes_per_stream / 1000.0),
                "",
                "",
                "",
                "",
                "–",
                None,
            );
        }
    }
}
