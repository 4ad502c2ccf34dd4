//! The pipeline: mock upstream, Relay (cold start, admin, notes), legs at fixed rates against the
//! mock directly and through Relay, Relay's highest held rate, the memory API, suggestions, open
//! streams after a restart, note injection in-process, and last LiteLLM at the same rates and its
//! own highest rate. The full run and smoke mode are the same code at different scales.

mod cache;
mod doors;
mod postgres;
mod profile;
mod steps;
mod streams;
mod usage;

pub use cache::{CacheRow, LEGS as CACHE_LEGS};
pub use doors::DoorScale;
pub use postgres::{DEFAULT_ADMIN_URL, FreshDb, PostgresFigures};
pub use profile::{Work, profile};
pub use streams::streams_only;
use streams::{floor_streams, https_streams, warm_then_hold};
pub use usage::{LedgerFigures, MaxSearch, UsageQueryFigures};

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use crate::data::{FAST_MODEL, PROJECT, openai_leg, relay_leg, suggest_body};
use crate::load::{Pace, Target};
use crate::mock::Mock;
use crate::procfs;
use crate::relay;
use crate::report::{RateRow, Report};

use steps::{
    admin_token, check_direct, check_leg, highest_rate, http_client, load_generator, measured,
    now_utc, run_litellm, secs, seed_notes, settle, start_mock, start_relay,
};

/// How big a run is.
#[derive(Debug, Clone)]
pub struct Scale {
    /// Fixed leg rates, legs/s.
    pub rates: Vec<u32>,
    pub rate_secs: f64,
    pub warmup_secs: f64,
    /// The ladder the highest-rate search climbs for Relay and for LiteLLM, then bisects.
    pub relay_ladder: Vec<u32>,
    pub litellm_ladder: Vec<u32>,
    pub bisect_steps: u32,
    pub step_secs: f64,
    /// Notes seeded into the benchmark project through the API.
    pub seed_notes: usize,
    pub streams: usize,
    /// Project sizes injection is timed at, in one store grown from the first to the last.
    pub inject_notes: Vec<usize>,
    pub inject_questions: usize,
    /// Injection timing stops after this long (a slow lookup would otherwise take hours).
    pub inject_budget_secs: f64,
    pub memory_secs: f64,
    pub memory_connections: u32,
    pub suggest_rate: u32,
    pub suggest_secs: f64,
    /// Ledger records `GET /v1/usage` is timed over, and the calls per `group_by`.
    pub usage_records: u64,
    pub usage_calls: usize,
    /// The ledger on/off comparison: seconds per measured run, and rounds of (on, off).
    pub ledger_secs: f64,
    pub ledger_rounds: usize,
    /// The highest-rate search with the ledger on and off.
    pub ledger_max: MaxSearch,
    /// The door rows: alternating rounds of each path at each body size.
    pub doors: DoorScale,
}

impl Scale {
    pub fn full() -> Self {
        Self {
            rates: vec![200, 500, 1_000, 2_000],
            rate_secs: 10.0,
            warmup_secs: 3.0,
            relay_ladder: vec![
                10, 25, 50, 100, 200, 500, 1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 8_000, 10_000,
                12_000, 16_000,
            ],
            litellm_ladder: vec![10, 25, 50, 100, 150, 200, 300, 400, 600, 800, 1_200, 1_600],
            bisect_steps: 3,
            step_secs: 5.0,
            seed_notes: 300,
            streams: 10_000,
            inject_notes: vec![1_000, 10_000, 100_000],
            inject_questions: 1_000,
            inject_budget_secs: 60.0,
            memory_secs: 5.0,
            memory_connections: 16,
            suggest_rate: 200,
            suggest_secs: 10.0,
            usage_records: 1_000_000,
            usage_calls: 200,
            ledger_secs: 10.0,
            ledger_rounds: 2,
            ledger_max: MaxSearch {
                ladder: vec![1_000, 2_000, 3_000, 4_000, 5_000, 6_000, 8_000, 10_000],
                bisect: 2,
                step: Duration::from_secs(5),
            },
            doors: DoorScale {
                rounds: 3,
                per_round: Duration::from_secs(2),
            },
        }
    }

    /// The same pipeline in seconds: numbers come out, the targets are not checked.
    pub fn smoke() -> Self {
        Self {
            rates: vec![50],
            rate_secs: 2.0,
            warmup_secs: 0.5,
            relay_ladder: vec![50, 100],
            litellm_ladder: vec![5, 10],
            bisect_steps: 0,
            step_secs: 1.0,
            seed_notes: 20,
            streams: 200,
            inject_notes: vec![100, 500, 2_000],
            inject_questions: 50,
            inject_budget_secs: 10.0,
            memory_secs: 1.0,
            memory_connections: 4,
            suggest_rate: 50,
            suggest_secs: 1.0,
            usage_records: 20_000,
            usage_calls: 20,
            ledger_secs: 1.0,
            ledger_rounds: 1,
            ledger_max: MaxSearch {
                ladder: vec![50, 100],
                bisect: 0,
                step: Duration::from_secs(1),
            },
            doors: DoorScale {
                rounds: 1,
                per_round: Duration::from_millis(200),
            },
        }
    }
}

/// What runs where.
#[derive(Debug, Clone)]
pub struct Options {
    pub smoke: bool,
    pub scale: Scale,
    /// The `relay` binary (`relay serve` as a child); `None` runs Relay in-process.
    pub relay_bin: Option<PathBuf>,
    /// This harness's own binary, to run the mock as `relay-bench mock`; `None` runs it on a thread.
    pub mock_exe: Option<PathBuf>,
    /// `relay-bench-floor`, the bare proxy the open-stream row is measured beside; `None` skips
    /// that baseline.
    pub floor_exe: Option<PathBuf>,
    /// oha; `None` uses the built-in generator.
    pub oha: Option<PathBuf>,
    /// The `litellm` script; `None` skips LiteLLM (smoke mode).
    pub litellm: Option<PathBuf>,
    /// A PostgreSQL server URL (of a database there that may create more) for the PostgreSQL
    /// rows; `None` skips them.
    pub postgres: Option<String>,
    /// As shown in the report.
    pub command: String,
}

/// The p99 a held rate must stay under.
pub const P99_LIMIT_MS: f64 = 50.0;

/// The whole benchmark.
pub async fn run(opts: &Options) -> Result<Report> {
    let scale = &opts.scale;
    let dir = tempfile::tempdir()?;
    let http = http_client()?;
    let generator = load_generator(opts, dir.path())?;
    let mut report = Report {
        smoke: opts.smoke,
        date: now_utc(),
        machine: procfs::machine(),
        command: opts.command.clone(),
        load_before: procfs::loadavg(),
        generator: generator.describe(),
        seeded_notes: scale.seed_notes,
        suggest_rate: scale.suggest_rate,
        ..Report::default()
    };

    let mock = start_mock(opts).await?;
    report.mock_mode = match &mock {
        Mock::Process { .. } => "own process (`relay-bench mock`), single-threaded tokio runtime; not pinned: the 2 cores are shared by mock, Relay and the load generator".into(),
        Mock::Thread { .. } => "in-process thread with its own single-threaded runtime".into(),
    };
    let direct_url = format!("{}/chat/completions", mock.base_url());
    check_direct(&http, &direct_url).await?;

    let config = relay::write_config(dir.path(), &mock.base_url())?;
    eprintln!("relay-bench: starting Relay on a fresh database");
    let relay = start_relay(opts, &config, dir.path(), &http, 1).await?;
    report.relay_mode = match &opts.relay_bin {
        Some(bin) => format!("`{} serve` (child process), SQLite, accounts on, production Argon2 costs", bin.display()),
        None => "in-process (`relay_server::Relay` on its own 2-thread runtime; CPU and RSS include the harness)".into(),
    };
    report.ready_cold_ms = relay.ready_ms;
    report.idle_rss_cold_kib = procfs::rss_kib(relay.pid)?;
    let base = relay.base();
    let token = admin_token(opts, &config, &http, &base).await?;
    seed_notes(&http, &base, &token, scale.seed_notes).await?;
    report.notes_per_leg = check_leg(&http, &base, &token).await?;

    let relay_target = Target::post_json(
        format!("{base}/v1/agent/stream"),
        &relay_leg(FAST_MODEL, PROJECT),
    )
    .bearer(&token);
    let direct_target = Target::post_json(direct_url.clone(), &openai_leg(FAST_MODEL));

    eprintln!("relay-bench: warm-up");
    let warm = Pace::Rate(scale.rates.first().copied().unwrap_or(100).max(100));
    generator
        .run(&direct_target, warm, secs(scale.warmup_secs))
        .await?;
    generator
        .run(&relay_target, warm, secs(scale.warmup_secs))
        .await?;

    for &rate in &scale.rates {
        eprintln!("relay-bench: {rate} legs/s, direct then through Relay");
        settle(relay.pid, Duration::from_secs(10)).await;
        let direct = generator
            .run(&direct_target, Pace::Rate(rate), secs(scale.rate_secs))
            .await?;
        let (relay_result, cpu) = measured(
            &generator,
            &relay_target,
            Pace::Rate(rate),
            secs(scale.rate_secs),
            relay.pid,
        )
        .await?;
        eprintln!(
            "  direct p50 {:.3} p99 {:.3} ms | relay p50 {:.3} p99 {:.3} ms, {:.3} ms CPU/leg",
            direct.p50_ms, direct.p99_ms, relay_result.p50_ms, relay_result.p99_ms, cpu
        );
        report.rates.push(RateRow {
            rate,
            direct,
            relay: relay_result,
            relay_cpu_ms_per_leg: cpu,
            litellm: None,
            litellm_cpu_ms_per_leg: None,
        });
    }

    eprintln!("relay-bench: Relay's highest rate with p99 < {P99_LIMIT_MS} ms");
    report.relay_max = highest_rate(
        &generator,
        &relay_target,
        &scale.relay_ladder,
        scale.bisect_steps,
        secs(scale.step_secs),
        relay.pid,
    )
    .await?;

    eprintln!("relay-bench: memory API and suggestions");
    settle(relay.pid, Duration::from_secs(30)).await;
    let remember = remember_target(&base, &token);
    report.remember = generator
        .run(
            &remember,
            Pace::Closed(scale.memory_connections),
            secs(scale.memory_secs),
        )
        .await?;
    let recall =
        Target::get(format!("{base}/v1/memory/recall?project_id={PROJECT}")).bearer(&token);
    report.recall = generator
        .run(
            &recall,
            Pace::Closed(scale.memory_connections),
            secs(scale.memory_secs),
        )
        .await?;
    let suggest =
        Target::post_json(format!("{base}/v1/suggest"), &suggest_body(200)).bearer(&token);
    let probe: Value = http
        .post(format!("{base}/v1/suggest"))
        .bearer_auth(&token)
        .json(&suggest_body(200))
        .send()
        .await?
        .json()
        .await?;
    if probe["suggestion"] != "cargo test -p relay-server --test api" {
        bail!("the suggestion did not come from history: {probe}");
    }
    report.suggest = generator
        .run(
            &suggest,
            Pace::Rate(scale.suggest_rate),
            secs(scale.suggest_secs),
        )
        .await?;

    eprintln!(
        "relay-bench: restart on the filled database, then {} open streams",
        scale.streams
    );
    relay.stop().await?;
    let relay = start_relay(opts, &config, dir.path(), &http, 2).await?;
    report.ready_warm_ms = relay.ready_ms;
    report.idle_rss_warm_kib = procfs::rss_kib(relay.pid)?;
    let base = relay.base();
    let token = relay::sign_in(&http, &base).await?;
    report.streams = warm_then_hold(&http, &relay, &token, &mock.base_url(), scale.streams).await?;
    if let Some(why) = &report.streams.capped_by {
        report.caveats.push(format!(
            "Open streams: {} were opened instead of {}, because of {}. The per-stream figure is measured the same way and does not depend on the count.",
            report.streams.opened, report.streams.requested, why
        ));
    }
    relay.stop().await?;
    report.streams_floor = floor_streams(opts, &mock.base_url(), None, scale.streams).await?;
    if let Some((relay_https, floor_https)) =
        https_streams(opts, dir.path(), &http, scale.streams).await?
    {
        report.streams_https = Some(relay_https);
        report.streams_https_floor = floor_https;
    }

    eprintln!(
        "relay-bench: note injection with {:?} notes, in-process",
        scale.inject_notes
    );
    report.injection = crate::inject::measure_growth(
        dir.path(),
        &scale.inject_notes,
        scale.inject_questions,
        secs(scale.inject_budget_secs),
    )
    .await?;
    for inj in &report.injection {
        if inj.questions < inj.asked {
            report.caveats.push(format!(
                "Note injection with {} notes: only {} of {} questions were timed within the {:.0} s budget; the percentiles are over those.",
                inj.notes, inj.questions, inj.asked, scale.inject_budget_secs
            ));
        }
    }
    eprintln!(
        "relay-bench: prompt-cache share over {}-leg tool sessions, direct and through Relay",
        cache::LEGS
    );
    report.cache = cache::measure(opts, dir.path()).await?;
    // At the rate the latency targets are stated at (smoke: its one rate).
    let ledger_rate = if scale.rates.contains(&crate::report::TARGET_RATE) {
        crate::report::TARGET_RATE
    } else {
        scale.rates.first().copied().unwrap_or(50)
    };
    eprintln!(
        "relay-bench: p99 and CPU per leg at {ledger_rate} legs/s and the highest rate held, usage ledger on and off"
    );
    report.ledger = Some(
        usage::ledger_cpu(
            opts,
            &mock,
            dir.path(),
            ledger_rate,
            secs(scale.ledger_secs),
            scale.ledger_rounds,
            Some(&scale.ledger_max),
        )
        .await?,
    );
    eprintln!("relay-bench: Claude Code-sized calls through /v1/messages, beside the bare proxy");
    report.doors = doors::measure(opts, &mock, dir.path(), scale.doors).await?;
    eprintln!(
        "relay-bench: GET /v1/usage over {} ledger records",
        scale.usage_records
    );
    report.usage_query =
        Some(usage::usage_query(opts, dir.path(), scale.usage_records, scale.usage_calls).await?);
    match &opts.postgres {
        Some(admin) => {
            // The same-rate comparison uses SQLite's target rate (or its last one, in smoke mode).
            let rate = scale
                .rates
                .iter()
                .copied()
                .find(|r| *r == crate::report::TARGET_RATE)
                .or_else(|| scale.rates.last().copied())
                .unwrap_or(100);
            eprintln!("relay-bench: Relay on a fresh PostgreSQL database, {rate} legs/s");
            report.postgres = Some(
                postgres::figures(opts, admin, &generator, &mock, dir.path(), &http, rate).await?,
            );
        }
        None => report
            .caveats
            .push("The PostgreSQL rows were not run (`--no-postgres`).".into()),
    }
    // LiteLLM last: it is the stage most likely to fail, and every figure of Relay's is in by then.
    match &opts.litellm {
        Some(bin) => {
            run_litellm(
                &generator,
                bin,
                dir.path(),
                &mock,
                &http,
                scale,
                &mut report,
            )
            .await?
        }
        None => report.litellm_mode = "not run (smoke mode)".into(),
    }
    mock.stop().await;
    report.load_after = procfs::loadavg();
    if relay_in_process(opts) {
        report
            .caveats
            .push("Relay ran in-process: its CPU and RSS figures include the harness.".into());
    }
    Ok(report)
}

fn relay_in_process(opts: &Options) -> bool {
    opts.relay_bin.is_none()
}

/// Remember with a new note each time: one body, repeated, would be found already stored and not
/// written again.
fn remember_target(base: &str, token: &str) -> Target {
    Target::post_json(
        format!("{base}/v1/memory/remember"),
        &json!({"note": "Bench note {seq}: the ingest worker retries 3 times with jittered backoff", "project_id": "bench-memory"}),
    )
    .bearer(token)
    .varied()
}

/// Only the prompt-cache rows (`relay-bench cache`).
pub async fn cache_only(opts: &Options) -> Result<Vec<CacheRow>> {
    let dir = tempfile::tempdir()?;
    cache::measure(opts, dir.path()).await
}

/// Only the ledger on/off rows at `rate` (`relay-bench ledger`), with the highest-rate search
/// when `max` is given.
pub async fn ledger_only(
    opts: &Options,
    rate: u32,
    duration: Duration,
    rounds: usize,
    max: Option<&MaxSearch>,
) -> Result<LedgerFigures> {
    let dir = tempfile::tempdir()?;
    let mock = start_mock(opts).await?;
    let result = usage::ledger_cpu(opts, &mock, dir.path(), rate, duration, rounds, max).await;
    mock.stop().await;
    result
}

/// Only the door rows (`relay-bench doors`).
pub async fn doors_only(opts: &Options, scale: DoorScale) -> Result<Vec<crate::doors::DoorRow>> {
    let dir = tempfile::tempdir()?;
    let mock = start_mock(opts).await?;
    let result = doors::measure(opts, &mock, dir.path(), scale).await;
    mock.stop().await;
    result
}

/// Only the `GET /v1/usage` row (`relay-bench usage-query`).
pub async fn usage_query_only(
    opts: &Options,
    records: u64,
    calls: usize,
) -> Result<UsageQueryFigures> {
    let dir = tempfile::tempdir()?;
    usage::usage_query(opts, dir.path(), records, calls).await
}
