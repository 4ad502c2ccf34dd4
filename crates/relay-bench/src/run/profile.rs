//! A profiling run: mock and Relay, then one kind of work held for a while, optionally under
//! `perf record` (`relay-bench profile`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use super::steps::{
    self, admin_token, http_client, load_generator, seed_notes, start_mock, start_relay,
};
use super::{Options, postgres, remember_target};
use crate::data::{FAST_MODEL, PROJECT, relay_leg};
use crate::load::{Pace, Target};
use crate::relay;

/// What a profiling run sends.
#[derive(Debug, Clone, Copy)]
pub enum Work {
    /// Agent legs at this many a second (open loop).
    Legs(u32),
    /// Remembers of new notes, closed loop over the memory stage's connections.
    Remember,
}

/// Starts mock and Relay, seeds notes, and runs legs at `rate` for `duration` while `perf record`
/// samples Relay (when `perf_out` is given): the profile behind BENCHMARKS.md's hot-path findings.
pub async fn profile(
    opts: &Options,
    work: Work,
    duration: Duration,
    perf_out: Option<PathBuf>,
    on_postgres: Option<&str>,
    embed_url: Option<&str>,
) -> Result<()> {
    let db = match on_postgres {
        Some(admin) => Some(postgres::FreshDb::create(admin).await?),
        None => None,
    };
    let result = profile_on(opts, work, duration, perf_out, db.as_ref(), embed_url).await;
    if let Some(db) = db {
        db.drop_it().await?;
    }
    result
}

async fn profile_on(
    opts: &Options,
    work: Work,
    duration: Duration,
    perf_out: Option<PathBuf>,
    db: Option<&postgres::FreshDb>,
    embed_url: Option<&str>,
) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let http = http_client()?;
    let generator = load_generator(opts, dir.path())?;
    let mock = start_mock(opts).await?;
    let config = match db {
        Some(db) => {
            relay::write_config_on(dir.path(), &mock.base_url(), None, &db.url, "relay-pg.toml")?
        }
        None => relay::write_config(dir.path(), &mock.base_url())?,
    };
    if let Some(url) = embed_url {
        relay::add_embeddings(&config, url)?;
    }
    let relay = start_relay(opts, &config, dir.path(), &http, 1).await?;
    let base = relay.base();
    let token = admin_token(opts, &config, &http, &base).await?;
    seed_notes(&http, &base, &token, opts.scale.seed_notes).await?;
    let (target, pace, what) = match work {
        Work::Legs(rate) => (
            Target::post_json(
                format!("{base}/v1/agent/stream"),
                &relay_leg(FAST_MODEL, PROJECT),
            )
            .bearer(&token),
            Pace::Rate(rate),
            format!("{rate} legs/s"),
        ),
        Work::Remember => (
            remember_target(&base, &token),
            Pace::Closed(opts.scale.memory_connections),
            format!(
                "remember over {} connections",
                opts.scale.memory_connections
            ),
        ),
    };
    generator.run(&target, pace, Duration::from_secs(2)).await?;
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
    let (result, cpu, db_cpu) = steps::measured_with_db(
        &generator,
        &target,
        pace,
        duration,
        relay.pid,
        db.map(|d| d.name.as_str()),
    )
    .await?;
    if let Some(mut perf) = perf {
        perf.wait().await?;
    }
    println!(
        "{what} for {duration:?}: p50 {:.3} p90 {:.3} p99 {:.3} ms, {:.0}/s served, {:.2} % ok, {:.3} ms CPU per request{}",
        result.p50_ms,
        result.p90_ms,
        result.p99_ms,
        result.rps,
        result.success_ratio() * 100.0,
        cpu,
        db_cpu.map_or(String::new(), |c| format!(" (+ {c:.3} in PostgreSQL)"))
    );
    relay.stop().await?;
    mock.stop().await;
    Ok(())
}
