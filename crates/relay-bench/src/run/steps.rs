//! The pipeline's steps: starting the mock and Relay, seeding and checking legs, settling,
//! measuring a window, searching for the highest held rate, and the LiteLLM leg.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::data::{FAST_MODEL, PROJECT, Rng, note, openai_leg, relay_leg};
use crate::litellm::LiteLlm;
use crate::load::{Generator, LoadResult, Pace, Target};
use crate::mock::Mock;
use crate::procfs;
use crate::relay::{self, Running};
use crate::report::{MaxRate, Report};

use super::{Options, P99_LIMIT_MS, Scale};

pub(super) fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

pub(super) fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// CPU milliseconds per served leg between two tick readings.
pub(super) fn cpu_ms_per_leg(ticks: u64, legs: u64) -> f64 {
    if legs == 0 {
        return f64::NAN;
    }
    ticks as f64 / procfs::clk_tck() * 1000.0 / legs as f64
}

/// Runs `target` at `pace` while reading the CPU ticks of `pid`'s process tree around it.
pub(super) async fn measured(
    generator: &Generator,
    target: &Target,
    pace: Pace,
    duration: Duration,
    pid: u32,
) -> Result<(LoadResult, f64)> {
    let (result, cpu, _) = measured_with_db(generator, target, pace, duration, pid, None).await?;
    Ok((result, cpu))
}

/// `measured`, and with `db` (a PostgreSQL database's name) also the CPU per leg of the server
/// backends working for that database, which run outside Relay's process tree.
pub(super) async fn measured_with_db(
    generator: &Generator,
    target: &Target,
    pace: Pace,
    duration: Duration,
    pid: u32,
    db: Option<&str>,
) -> Result<(LoadResult, f64, Option<f64>)> {
    let db_ticks = || db.map(procfs::matching_cpu_ticks);
    let (before, db_before) = (procfs::tree_cpu_ticks(pid), db_ticks());
    let result = generator.run(target, pace, duration).await?;
    let (after, db_after) = (procfs::tree_cpu_ticks(pid), db_ticks());
    let cpu = cpu_ms_per_leg(after.saturating_sub(before), result.ok);
    let db_cpu = db_before
        .zip(db_after)
        .map(|(b, a)| cpu_ms_per_leg(procfs::ticks_since(&b, &a), result.ok));
    Ok((result, cpu, db_cpu))
}

/// Waits (polling every 250 ms, up to `max`) until `pid`'s tree uses under 5 % of a core: a server
/// still working off the last run's backlog would spoil the next one.
pub(super) async fn settle(pid: u32, max: Duration) {
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
pub(super) async fn highest_rate(
    generator: &Generator,
    target: &Target,
    ladder: &[u32],
    bisect: u32,
    step: Duration,
    pid: u32,
) -> Result<MaxRate> {
    highest_rate_with_db(generator, target, ladder, bisect, step, pid, None).await
}

/// `highest_rate`, also reading the CPU of database `db`'s PostgreSQL backends (see
/// `measured_with_db`).
pub(super) async fn highest_rate_with_db(
    generator: &Generator,
    target: &Target,
    ladder: &[u32],
    bisect: u32,
    step: Duration,
    pid: u32,
    db: Option<&str>,
) -> Result<MaxRate> {
    let mut out = MaxRate::default();
    let mut failed_at = None;
    for &rate in ladder {
        settle(pid, Duration::from_secs(30)).await;
        let (r, cpu, db_cpu) =
            measured_with_db(generator, target, Pace::Rate(rate), step, pid, db).await?;
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
            out.db_cpu_ms_per_leg = db_cpu;
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
        let (r, cpu, db_cpu) =
            measured_with_db(generator, target, Pace::Rate(mid), step, pid, db).await?;
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
            out.db_cpu_ms_per_leg = db_cpu;
        } else {
            hi = mid;
        }
    }
    Ok(out)
}

/// The harness's own HTTP client (checks, seeding, sign-in).
pub(super) fn http_client() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?)
}

/// oha when there is one, else the built-in generator.
pub(super) fn load_generator(opts: &Options, scratch: &std::path::Path) -> Result<Generator> {
    match &opts.oha {
        Some(bin) => Generator::oha(bin.clone(), scratch),
        None => Generator::builtin(),
    }
}

/// The mock upstream in its own process, or on a thread when there is no harness binary.
pub(super) async fn start_mock(opts: &Options) -> Result<Mock> {
    match &opts.mock_exe {
        Some(exe) => Mock::start_process(exe).await,
        None => Mock::start_thread(),
    }
}

/// Creates the benchmark admin and signs it in on the Relay at `base`.
pub(super) async fn admin_token(
    opts: &Options,
    config: &std::path::Path,
    http: &reqwest::Client,
    base: &str,
) -> Result<String> {
    relay::add_admin(opts.relay_bin.as_deref(), config).await?;
    relay::sign_in(http, base).await
}

pub(super) async fn start_relay(
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
pub(super) async fn seed_notes(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    n: usize,
) -> Result<()> {
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
pub(super) async fn check_leg(http: &reqwest::Client, base: &str, token: &str) -> Result<u64> {
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
pub(super) async fn check_direct(http: &reqwest::Client, url: &str) -> Result<()> {
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

pub(super) async fn run_litellm(
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

pub(super) async fn litellm_figures(
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
