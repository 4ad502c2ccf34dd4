//! The live view of an interactive session: a spinner with the elapsed time until a leg's first
//! token, the session's usage as the relay reported it (tokens in, out and cached per leg, the
//! ledger's cost, the account's units and token budget left), and the status line that shows
//! them (the editor draws it under the prompt, `editor.rs`). The spinner moves the cursor, so it
//! is drawn on a terminal only.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use relay_client::Client;
use relay_wire::agent::Usage;

use super::display::{self, Paint};

/// What this session spent, from the `tool_calls` and `done` events.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    pub legs: u64,
    pub input: u64,
    pub output: u64,
    pub cached: u64,
    /// The `request_id` of every leg, to find them in the ledger.
    pub request_ids: Vec<String>,
}

impl Totals {
    pub fn add(&mut self, u: &Usage) {
        self.legs += 1;
        self.input += u.input_tokens;
        self.output += u.output_tokens;
        self.cached += u.cached_input_tokens.unwrap_or(0);
    }

    /// The share of prompt tokens read from the provider's cache, in percent.
    pub fn cached_share(&self) -> u64 {
        (self.cached * 100).checked_div(self.input).unwrap_or(0)
    }
}

/// The ledger's view of this session's legs.
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    pub found: usize,
    pub input: i64,
    pub output: i64,
    pub cached: i64,
    /// USD; `None` when no leg found was of a priced model.
    pub cost: Option<f64>,
}

/// Looks this session's legs up in the caller's ledger (newest first, a few pages at most: a
/// session's legs are the newest ones).
pub async fn ledger(client: &Client, ids: &[String]) -> Option<Ledger> {
    let mut out = Ledger::default();
    let mut cursor: Option<String> = None;
    for _ in 0..5 {
        let page = client.usage_legs(200, cursor.as_deref()).await.ok()?;
        for leg in page.items.iter().filter(|l| ids.contains(&l.request_id)) {
            out.found += 1;
            out.input += leg.input_tokens;
            out.output += leg.output_tokens;
            out.cached += leg.cached_input_tokens;
            if let Some(c) = leg.cost_usd {
                out.cost = Some(out.cost.unwrap_or(0.0) + c);
            }
        }
        match page.next {
            Some(n) if out.found < ids.len() => cursor = Some(n),
            _ => break,
        }
    }
    Some(out)
}

/// The account's allowance left: `(units, tokens)`, each `None` when unlimited or unknown.
pub async fn left(client: &Client) -> (Option<i64>, Option<i64>) {
    match client.me().await {
        Ok(me) if me.auth => (
            (me.remaining >= 0).then_some(me.remaining),
            (me.tokens_remaining >= 0).then_some(me.tokens_remaining),
        ),
        _ => (None, None),
    }
}

/// `scripted · 20 in / 4 out · 50% cached · $0.0012 · 998 units left`.
pub fn status_line(
    model: &str,
    t: &Totals,
    cost: Option<f64>,
    left: (Option<i64>, Option<i64>),
) -> String {
    let mut parts = vec![
        display::line(model),
        format!("{} in / {} out", t.input, t.output),
        format!("{}% cached", t.cached_share()),
    ];
    if let Some(c) = cost {
        parts.push(format!("${c:.4}"));
    }
    if let Some(u) = left.0 {
        parts.push(format!("{u} units left"));
    }
    if let Some(k) = left.1 {
        parts.push(format!("{k} tokens left this month"));
    }
    parts.join(" · ")
}

/// A spinner on standard error until `stop` (or drop); nothing when it is not a terminal.
pub struct Spinner {
    active: Arc<Mutex<bool>>,
}

const FRAMES: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

impl Spinner {
    pub fn start(label: String, enabled: bool) -> Self {
        let on = enabled && std::io::stderr().is_terminal();
        let active = Arc::new(Mutex::new(on));
        if on {
            let flag = active.clone();
            let paint = Paint::new();
            tokio::spawn(async move {
                let started = Instant::now();
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                for frame in FRAMES.iter().cycle() {
                    tick.tick().await;
                    // The flag is held while drawing, so `stop` never races a half-drawn frame.
                    let Ok(on) = flag.lock() else { return };
                    if !*on {
                        return;
                    }
                    let secs = started.elapsed().as_secs_f64();
                    eprint!(
                        "\r\x1b[2K{}",
                        paint.dim(&format!("{frame} {label} {secs:.1}s"))
                    );
                    let _ = std::io::stderr().flush();
                }
            });
        }
        Self { active }
    }

    /// Clears the spinner's line; later calls do nothing.
    pub fn stop(&self) {
        if let Ok(mut on) = self.active.lock()
            && *on
        {
            *on = false;
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_up_and_the_line_shows_them() {
        let mut t = Totals::default();
        t.add(&Usage {
            input_tokens: 100,
            output_tokens: 5,
            cached_input_tokens: Some(50),
            ..Usage::default()
        });
        t.add(&Usage {
            input_tokens: 100,
            output_tokens: 7,
            ..Usage::default()
        });
        assert_eq!(
            (t.legs, t.input, t.output, t.cached_share()),
            (2, 200, 12, 25)
        );
        assert_eq!(
            status_line("m", &t, Some(0.5), (Some(9), None)),
            "m · 200 in / 12 out · 25% cached · $0.5000 · 9 units left"
        );
        assert_eq!(Totals::default().cached_share(), 0);
    }
}
