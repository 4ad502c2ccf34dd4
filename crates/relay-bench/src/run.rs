//! The pipeline: mock upstream, Relay (cold start, admin, notes), legs at fixed rates against the
//! mock directly and through Relay, Relay's highest held rate, the memory API, suggestions, open
//! streams after a restart, note injection in-process, and last LiteLLM at the same rates and its
//! own highest rate. The full run and smoke mode are the same code at different scales.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::data::{FAST_MODEL, PROJECT, Rng, note, openai_leg, relay_leg, suggest_body};
use crate::litellm::LiteLlm;
use crate::load::{Generator, LoadResult, Pace, Target};
use crate::mock::Mock;
use crate::procfs;
use crate::relay::{self, Running};
use crate::report::{MaxRate, RateRow, Report};

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
    pub inject_notes: usize,
    pub inject_questions: usize,
    /// Injection timing stops after this long (a slow lookup would otherwise take hours).
    pub inject_budget_secs: f64,
    pub memory_secs: f64,
    pub memory_connections: u32,
    pub suggest_rate: u32,
    pub suggest_secs: f64,
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
            inject_notes: 10_000,
            inject_questions: 1_000,
            inject_budget_secs: 60.0,
            memory_secs: 5.0,
            memory_connections: 16,
            suggest_rate: 200,
            suggest_secs: 10.0,
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
            inject_notes: 500,
            inject_questions: 50,
            inject_budget_secs: 10.0,
            memory_secs: 1.0,
            memory_connections: 4,
            suggest_rate: 50,
            suggest_secs: 1.0,
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
    /// oha; `None` uses the built-in generator.
    pub oha: Option<PathBuf>,
    /// The `litellm` script; `None` skips LiteLLM (smoke mode).
    pub litellm: Option<PathBuf>,
    /// As shown in the report.
    pub command: String,
}

/// The p99 a held rate must stay under.
pub const P99_LIMIT_MS: f64 = 50.0;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// CPU milliseconds per served leg between two tick readings.
fn cpu_ms_per_leg(ticks: u64, legs: u64) -> f64 {
    if legs == 0 {
        return f64::NAN;
    }
    ticks as f64 / procfs::clk_tck() * 1000.0 / legs as f64
}

/// Runs `target` at `pace` while reading the CPU ticks of `pid`'s process tree around it.
async fn measured(
    generator: &Generator,
    target: &Target,
    pace: Pace,
    duration: Duration,
    pid: u32,
) -> Result<(LoadResult, f64)> {
    let before = procfs::tree_cpu_ticks(pid);
    let result = generator.run(target, pace, duration).await?;
    let after = procfs::tree_cpu_ticks(pid);
    let cpu = cpu_ms_per_leg(after.saturating_sub(before), result.ok);
    Ok((result, cpu))
}

/// Waits (polling every 250 ms, up to `max`) until `pid`'s tree uses under 5 % of a core: a server
/// still working off the last run's backlog would spoil the next one.
async fn settle(pid: u32, max: Duration) {
    let deadline = Instant::now() + max;
    let tck = procfs::clk_tck();
    loop {
        let before = procfs::tree_cpu_ticks(pid);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let used = procfs::tree_cpu_ticks(pid).saturating_sub(before) as f64 / tck;
        if used < 0.0125 || Instant::now() > deadline {
            return;
        }
    }
}

/// Climbs `ladder` until a rate does not hold, then bisects between the last that held and it.
async fn highest_rate(
    generator: &Generator,
    target: &Target,
    ladder: &[u32],
    bisect: u32,
    step: Duration,
    pid: u32,
) -> Result<MaxRate> {
    let mut out = MaxRate::default();
    let mut failed_at = None;
    for &rate in ladder {
        settle(pid, Duration::from_secs(30)).await;
        let (r, cpu) = measured(generator, target, Pace::Rate(rate), step, pid).await?;
        eprintln!(
            "  {rate}/s: p99 {:.2} ms, {:.0}/s served, {:.2} % ok",
            r.p99_ms,
            r.rps,
            r.success_ratio() * 100.0
        );
        out.tried.push((rate, r.clone()));
        if r.held(rate, P99_LIMIT_MS) {
            out.rate = rate;
            out.at = Some(r);
            out.cpu_ms_per_leg = Some(cpu);
        } else {
            failed_at = Some(rate);
            break;
        }
    }
    let Some(mut hi) = failed_at else {
        out.top_of_search = true;
        return Ok(out);
    };
    let mut lo = out.rate;
    for _ in 0..bisect {
        let mid = lo + (hi - lo) / 2;
        if hi - lo <= (lo / 20).max(1) || mid == lo {
            break;
        }
        settle(pid, Duration::from_secs(30)).await;
        let (r, cpu) = measured(generator, target, Pace::Rate(mid), step, pid).await?;
        eprintln!(
            "  {mid}/s: p99 {:.2} ms, {:.0}/s served, {:.2} % ok",
            r.p99_ms,
            r.rps,
            r.success_ratio() * 100.0
        );
        out.tried.push((mid, r.clone()));
        if r.held(mid, P99_LIMIT_MS) {
            lo = mid;
            out.rate = mid;
            out.at = Some(r);
            out.cpu_ms_per_leg = Some(cpu);
        } else {
            hi = mid;
        }
    }
    Ok(out)
}

/// The harness's own HTTP client (checks, seeding, sign-in).
fn http_client() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?)
}

/// oha when there is one, else the built-in generator.
fn load_generator(opts: &Options, scratch: &std::path::Path) -> Result<Generator> {
    match &opts.oha {
        Some(bin) => Generator::oha(bin.clone(), scratch),
        None => Generator::builtin(),
    }
}

/// The mock upstream in its own process, or on a thread when there is no harness binary.
async fn start_mock(opts: &Options) -> Result<Mock> {
    match &opts.mock_exe {
        Some(exe) => Mock::start_process(exe).await,
        None => Mock::start_thread(),
    }
}

/// Creates the benchmark admin and signs it in on the Relay at `base`.
async fn admin_token(
    opts: &Options,
    config: &std::path::Path,
    http: &reqwest::Client,
    base: &str,
) -> Result<String> {
    relay::add_admin(opts.relay_bin.as_deref(), config).await?;
    relay::sign_in(http, base).await
}

async fn start_relay(
    opts: &Options,
    config: &std::path::Path,
    dir: &std::path::Path,
    http: &reqwest::Client,
    n: u32,
) -> Result<Running> {
    match &opts.relay_bin {
        Some(bin) => {
            Running::start_child(bin, config, &dir.join(format!("relay-{n}.log")), http).await
        }
        None => Running::start_in_process(config, http).await,
    }
}

/// Stores `n` notes in the benchmark project through `POST /v1/memory/remember`.
async fn seed_notes(http: &reqwest::Client, base: &str, token: &str, n: usize) -> Result<()> {
    let mut rng = Rng::new(42);
    let bodies: Vec<Value> = (0..n)
        .map(|i| json!({"note": note(&mut rng, i), "project_id": PROJECT}))
        .collect();
    let url = format!("{base}/v1/memory/remember");
    let results: Vec<Result<()>> = futures::stream::iter(bodies)
        .map(|b| {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let r = http.post(&url).bearer_auth(token).json(&b).send().await?;
                if !r.status().is_success() {
                    bail!("remember answered {}", r.status());
                }
                Ok(())
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    results.into_iter().collect()
}

/// One leg through Relay, checked line by line; returns how many notes it injected.
async fn check_leg(http: &reqwest::Client, base: &str, token: &str) -> Result<u64> {
    let text = http
        .post(format!("{base}/v1/agent/stream"))
        .bearer_auth(token)
        .json(&relay_leg(FAST_MODEL, PROJECT))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    let lines: Vec<Value> = text
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .with_context(|| format!("a leg answered lines that are not JSON: {text}"))?;
    let first = lines.first().context("a leg answered nothing")?;
    let last = lines.last().context("a leg answered nothing")?;
    if first["event"] != "start" || !(last["event"] == "done" || last["event"] == "tool_calls") {
        bail!("unexpected leg: {text}");
    }
    Ok(first["notes"].as_u64().unwrap_or(0))
}

/// One request to the mock directly, checked.
async fn check_direct(http: &reqwest::Client, url: &str) -> Result<()> {
    let text = http
        .post(url)
        .json(&openai_leg(FAST_MODEL))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    if !text.contains("[DONE]") {
        bail!("the mock's answer has no [DONE]: {text}");
    }
    Ok(())
}

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
    // Remember with a new note each time: one body, repeated, would be found already stored and
    // not written again.
    let remember = Target::post_json(
        format!("{base}/v1/memory/remember"),
        &json!({"note": "Bench note {seq}: the ingest worker retries 3 times with jittered backoff", "project_id": "bench-memory"}),
    )
    .bearer(&token)
    .varied();
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
    // A few ordinary legs first, so pools and allocator arenas exist before the baseline is read.
    for _ in 0..20 {
        check_leg(&http, &base, &token).await?;
    }
    let pid = relay.pid;
    report.streams =
        crate::streams::hold_open(&base, &token, scale.streams, || procfs::rss_kib(pid)).await?;
    eprintln!(
        "  {} open: RSS {} → {} KiB, {:.0} bytes per stream",
        report.streams.opened,
        report.streams.rss_before_kib,
        report.streams.rss_open_kib,
        report.streams.bytes_per_stream
    );
    if let Some(why) = &report.streams.capped_by {
        report.caveats.push(format!(
            "Open streams: {} were opened instead of {}, because of {}. The per-stream figure is measured the same way and does not depend on the count.",
            report.streams.opened, report.streams.requested, why
        ));
    }
    relay.stop().await?;

    eprintln!(
        "relay-bench: note injection with {} notes, in-process",
        scale.inject_notes
    );
    report.injection = crate::inject::measure(
        dir.path(),
        scale.inject_notes,
        scale.inject_questions,
        secs(scale.inject_budget_secs),
    )
    .await?;
    if report.injection.questions < report.injection.asked {
        report.caveats.push(format!(
            "Note injection: only {} of {} questions were timed within the {:.0} s budget; the percentiles are over those.",
            report.injection.questions, report.injection.asked, scale.inject_budget_secs
        ));
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

async fn run_litellm(
    generator: &Generator,
    bin: &std::path::Path,
    dir: &std::path::Path,
    mock: &Mock,
    http: &reqwest::Client,
    scale: &Scale,
    report: &mut Report,
) -> Result<()> {
    eprintln!("relay-bench: starting LiteLLM");
    let proxy = LiteLlm::start(bin, dir, &mock.base_url(), http).await?;
    report.litellm_mode = format!(
        "litellm {} (proxy, {} uvicorn workers, no database, offline cost map), ready {:.1} s after start",
        proxy.version,
        proxy.workers,
        proxy.ready_ms / 1000.0
    );
    let target = Target::post_json(proxy.url(), &openai_leg(FAST_MODEL)).bearer(&proxy.key);
    let result = litellm_figures(generator, &target, proxy.pid, scale, report).await;
    let tail = proxy.log_tail();
    proxy.stop().await?;
    result.with_context(|| format!("LiteLLM's log ends with:\n{tail}"))
}

async fn litellm_figures(
    generator: &Generator,
    target: &Target,
    pid: u32,
    scale: &Scale,
    report: &mut Report,
) -> Result<()> {
    // Warm-up: Python imports and connection pools are set up on the first requests.
    generator
        .run(target, Pace::Rate(20), secs(scale.warmup_secs))
        .await?;
    eprintln!("relay-bench: LiteLLM's highest rate with p99 < {P99_LIMIT_MS} ms");
    report.litellm_max = Some(
        highest_rate(
            generator,
            target,
            &scale.litellm_ladder,
            scale.bisect_steps,
            secs(scale.step_secs),
            pid,
        )
        .await?,
    );
    for row in &mut report.rates {
        eprintln!("relay-bench: LiteLLM at {} legs/s", row.rate);
        settle(pid, Duration::from_secs(60)).await;
        let (r, cpu) = measured(
            generator,
            target,
            Pace::Rate(row.rate),
            secs(scale.rate_secs),
            pid,
        )
        .await?;
        eprintln!(
            "  p50 {:.1} p99 {:.1} ms, {:.0}/s served, {:.1} % ok",
            r.p50_ms,
            r.p99_ms,
            r.rps,
            r.success_ratio() * 100.0
        );
        row.litellm = Some(r);
        row.litellm_cpu_ms_per_leg = Some(cpu);
    }
    Ok(())
}

/// Starts mock and Relay, seeds notes, and runs legs at `rate` for `duration` while `perf record`
/// samples Relay (when `perf_out` is given): the profile behind BENCHMARKS.md's hot-path findings.
pub async fn profile(
    opts: &Options,
    rate: u32,
    duration: Duration,
    perf_out: Option<PathBuf>,
) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let http = http_client()?;
    let generator = load_generator(opts, dir.path())?;
    let mock = start_mock(opts).await?;
    let config = relay::write_config(dir.path(), &mock.base_url())?;
    let relay = start_relay(opts, &config, dir.path(), &http, 1).await?;
    let base = relay.base();
    let token = admin_token(opts, &config, &http, &base).await?;
    seed_notes(&http, &base, &token, opts.scale.seed_notes).await?;
    let target = Target::post_json(
        format!("{base}/v1/agent/stream"),
        &relay_leg(FAST_MODEL, PROJECT),
    )
    .bearer(&token);
    generator
        .run(&target, Pace::Rate(rate), Duration::from_secs(2))
        .await?;
    let perf = match &perf_out {
        Some(out) => Some(
            tokio::process::Command::new("perf")
                .args(["record", "-F", "999", "--call-graph", "dwarf,32768", "-p"])
                .arg(relay.pid.to_string())
                .arg("-o")
                .arg(out)
                .arg("--")
                .arg("sleep")
                .arg(duration.as_secs().to_string())
                .spawn()
                .context("cannot run perf")?,
        ),
        None => None,
    };
    let (result, cpu) =
        measured(&generator, &target, Pace::Rate(rate), duration, relay.pid).await?;
    if let Some(mut perf) = perf {
        perf.wait().await?;
    }
    println!(
        "{rate} legs/s for {duration:?}: p50 {:.3} p90 {:.3} p99 {:.3} ms, {:.0}/s served, {:.3} ms CPU per leg",
        result.p50_ms, result.p90_ms, result.p99_ms, result.rps, cpu
    );
    relay.stop().await?;
    mock.stop().await;
    Ok(())
}

/// Only the open-stream measurement: mock, Relay, `streams` open legs; prints what it found.
pub async fn streams_only(opts: &Options, streams: usize) -> Result<crate::streams::StreamsResult> {
    let dir = tempfile::tempdir()?;
    let http = http_client()?;
    let mock = start_mock(opts).await?;
    let config = relay::write_config(dir.path(), &mock.base_url())?;
    let relay = start_relay(opts, &config, dir.path(), &http, 1).await?;
    let base = relay.base();
    let token = admin_token(opts, &config, &http, &base).await?;
    for _ in 0..20 {
        check_leg(&http, &base, &token).await?;
    }
    let pid = relay.pid;
    let result = crate::streams::hold_open(&base, &token, streams, || procfs::rss_kib(pid)).await?;
    relay.stop().await?;
    mock.stop().await;
    Ok(result)
}
