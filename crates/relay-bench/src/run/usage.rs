//! The usage rows (issue 35): CPU per leg with the usage ledger on and off at the same rate
//! (alternating, one Relay of each), and `GET /v1/usage` over a store filled with a million
//! ledger records for one account across 90 days.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::Options;
use super::steps::{
    admin_token, highest_rate, http_client, load_generator, measured, seed_notes, settle,
    start_relay,
};
use crate::data::{FAST_MODEL, PROJECT, relay_leg};
use crate::load::{LoadResult, Pace, Target};
use crate::mock::Mock;
use crate::relay;
use crate::report::MaxRate;

/// One ledger setting's measured rounds at one rate.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LedgerSide {
    pub rounds: Vec<(LoadResult, f64)>,
}

impl LedgerSide {
    /// The median of the rounds' p99 (ms).
    pub fn p99_ms(&self) -> f64 {
        let mut p99: Vec<f64> = self.rounds.iter().map(|(r, _)| r.p99_ms).collect();
        p99.sort_by(f64::total_cmp);
        p99.get(p99.len() / 2).copied().unwrap_or(f64::NAN)
    }

    /// CPU ms per leg over every round, weighted by the legs served.
    pub fn cpu_ms_per_leg(&self) -> f64 {
        let legs: f64 = self.rounds.iter().map(|(r, _)| r.ok as f64).sum();
        let cpu: f64 = self.rounds.iter().map(|(r, c)| r.ok as f64 * c).sum();
        cpu / legs.max(1.0)
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct LedgerFigures {
    pub rate: u32,
    pub secs: f64,
    pub on: LedgerSide,
    pub off: LedgerSide,
    /// The highest rate each held (p99 < 50 ms), when searched: (on, off).
    pub max_on: Option<MaxRate>,
    pub max_off: Option<MaxRate>,
}

impl LedgerFigures {
    /// CPU per leg with the ledger on ÷ off (target ≤ 1.10).
    pub fn ratio(&self) -> f64 {
        self.on.cpu_ms_per_leg() / self.off.cpu_ms_per_leg()
    }
}

/// The highest-rate search of the ledger rows: a ladder from the target rate up, then `bisect`
/// steps, `step` each.
#[derive(Debug, Clone)]
pub struct MaxSearch {
    pub ladder: Vec<u32>,
    pub bisect: u32,
    pub step: Duration,
}

/// Starts a Relay with `[usage] ledger = on` and one with it off (each on a fresh SQLite store,
/// the notes seeded), then runs legs at `rate` for `duration` against each in turn, `rounds` times;
/// then, with `max`, searches each one's highest rate held (off first, then on).
pub async fn ledger_cpu(
    opts: &Options,
    mock: &Mock,
    dir: &Path,
    rate: u32,
    duration: Duration,
    rounds: usize,
    max: Option<&MaxSearch>,
) -> Result<LedgerFigures> {
    let http = http_client()?;
    let generator = load_generator(opts, dir)?;
    let mut relays = Vec::new();
    for (n, on) in [(0u32, true), (1, false)] {
        let sub = dir.join(format!("ledger-{on}"));
        std::fs::create_dir_all(&sub)?;
        let config = relay::write_config(&sub, &mock.base_url())?;
        let mut text = std::fs::read_to_string(&config)?;
        text.push_str(&format!("\n[usage]\nledger = {on}\n"));
        std::fs::write(&config, text)?;
        let relay = start_relay(opts, &config, &sub, &http, 80 + n).await?;
        let base = relay.base();
        let token = admin_token(opts, &config, &http, &base).await?;
        seed_notes(&http, &base, &token, opts.scale.seed_notes).await?;
        let target = Target::post_json(
            format!("{base}/v1/agent/stream"),
            &relay_leg(FAST_MODEL, PROJECT),
        )
        .bearer(&token);
        // Warm each once, unmeasured.
        generator
            .run(&target, Pace::Rate(rate), Duration::from_secs(1))
            .await?;
        relays.push((on, relay, target));
    }
    let mut figures = LedgerFigures {
        rate,
        secs: duration.as_secs_f64(),
        ..LedgerFigures::default()
    };
    for round in 0..rounds {
        // Alternate which goes first, so drift in the machine's load falls on both.
        let order: Vec<usize> = if round % 2 == 0 {
            vec![0, 1]
        } else {
            vec![1, 0]
        };
        for i in order {
            let (on, relay, target) = &relays[i];
            settle(relay.pid, Duration::from_secs(5)).await;
            let measured =
                measured(&generator, target, Pace::Rate(rate), duration, relay.pid).await?;
            eprintln!(
                "  ledger {}: {rate} legs/s, p99 {:.3} ms, {:.3} ms CPU/leg",
                if *on { "on" } else { "off" },
                measured.0.p99_ms,
                measured.1
            );
            if *on {
                figures.on.rounds.push(measured);
            } else {
                figures.off.rounds.push(measured);
            }
        }
    }
    if let Some(search) = max {
        for i in [1, 0] {
            let (on, relay, target) = &relays[i];
            eprintln!(
                "  ledger {}: the highest rate held",
                if *on { "on" } else { "off" }
            );
            let found = highest_rate(
                &generator,
                target,
                &search.ladder,
                search.bisect,
                search.step,
                relay.pid,
            )
            .await?;
            if *on {
                figures.max_on = Some(found);
            } else {
                figures.max_off = Some(found);
            }
        }
    }
    for (_, relay, _) in relays {
        relay.stop().await?;
    }
    Ok(figures)
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct UsageQueryFigures {
    pub records: u64,
    pub fill_secs: f64,
    pub calls: usize,
    /// Per `group_by`: (name, p50 ms, p99 ms, rows answered).
    pub by: Vec<(String, f64, f64, usize)>,
}

impl UsageQueryFigures {
    pub fn worst_p99(&self) -> f64 {
        self.by.iter().map(|b| b.2).fold(0.0, f64::max)
    }
}

fn open_config(dir: &Path) -> Result<PathBuf> {
    let db = dir.join("usage.db");
    let path = dir.join("relay-usage.toml");
    std::fs::write(
        &path,
        format!(
            "bind = \"127.0.0.1:0\"\n\n[memory]\nurl = \"sqlite://{}\"\n",
            db.display()
        ),
    )?;
    Ok(path)
}

/// Fills `records` ledger records of the open-mode account (`local`) over the last 90 days, four
/// models and five projects (one of them none), through the store's own batch insert (which also
/// keeps the month counts and the daily roll-up), 10,000 records per transaction.
async fn fill(config: &Path, records: u64) -> Result<()> {
    use relay_server::store::usage::LegRecord;
    let config = relay_server::Config::load(Some(config), &relay_server::config::ProcessEnv)?;
    let stores = relay_server::store::Stores::open(&config).await?;
    let store = stores.memory.usage.clone();
    #[allow(clippy::cast_possible_wrap, reason = "Unix seconds fit i64")]
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    let span = 90 * 86_400_i64;
    let n = i64::try_from(records)?;
    let models = ["model-0", "model-1", "model-2", "model-3"];
    let mut batch = Vec::with_capacity(10_000);
    for i in 0..n {
        let k = usize::try_from(i % 20).unwrap_or(0);
        batch.push(LegRecord {
            user_id: "local".into(),
            request_id: format!("bench-{i}"),
            at: now - i * span / n,
            route: relay_server::domain::Door::Agent,
            model: models[k % 4].into(),
            provider: "mock".into(),
            project_id: (k % 5 != 0).then(|| format!("project-{}", k % 5)),
            status: "ok",
            input_tokens: 1_000 + i % 3_000,
            cached_input_tokens: i % 800,
            cache_write_tokens: 0,
            output_tokens: 50 + i % 400,
            reasoning_tokens: 0,
            ttfb_ms: 40,
            duration_ms: 900,
            #[allow(clippy::cast_precision_loss, reason = "a small integer")]
            cost_usd: Some(0.001 * (i % 7) as f64),
            reservation: None,
            estimated: false,
            server_tool_uses: 0,
        });
        if batch.len() == 10_000 || i == n - 1 {
            store
                .insert_legs(&batch)
                .await
                .context("cannot write usage records")?;
            batch.clear();
        }
    }
    Ok(())
}

/// A fresh store, filled with `records` records; Relay started on it; `calls` calls of `GET /v1/usage` per `group_by`, one at a time.
pub async fn usage_query(
    opts: &Options,
    dir: &Path,
    records: u64,
    calls: usize,
) -> Result<UsageQueryFigures> {
    let http = http_client()?;
    let sub = dir.join("usage-query");
    std::fs::create_dir_all(&sub)?;
    let config = open_config(&sub)?;
    let started = Instant::now();
    fill(&config, records).await?;
    let mut figures = UsageQueryFigures {
        records,
        fill_secs: started.elapsed().as_secs_f64(),
        calls,
        by: Vec::new(),
    };
    eprintln!(
        "  {records} usage records written in {:.1} s",
        figures.fill_secs
    );
    let relay = start_relay(opts, &config, &sub, &http, 71).await?;
    let base = relay.base();
    for group_by in ["day", "model", "project"] {
        let url = format!("{base}/v1/usage?group_by={group_by}");
        let mut times = Vec::with_capacity(calls);
        let mut rows = 0;
        for _ in 0..calls {
            let t = Instant::now();
            let r = http.get(&url).send().await?;
            let status = r.status();
            let body: serde_json::Value = r.json().await?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            if !status.is_success() || body["totals"]["legs"].as_i64().unwrap_or(0) == 0 {
                bail!("GET /v1/usage?group_by={group_by} answered {status}: {body}");
            }
            rows = body["rows"].as_array().map_or(0, Vec::len);
        }
        times.sort_by(f64::total_cmp);
        let at = |q: f64| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "an index"
            )]
            let i = ((times.len() as f64 - 1.0) * q).round() as usize;
            times.get(i).copied().unwrap_or(f64::NAN)
        };
        eprintln!(
            "  GET /v1/usage?group_by={group_by}: p50 {:.2} ms, p99 {:.2} ms, {rows} rows",
            at(0.5),
            at(0.99)
        );
        figures.by.push((group_by.into(), at(0.5), at(0.99), rows));
    }
    relay.stop().await?;
    Ok(figures)
}
