//! The PostgreSQL rows: the same Relay, workload and leg-rate search with its stores on a fresh
//! PostgreSQL database, which the harness creates on the server it is given and drops after.
//! The database server runs outside Relay's process tree, so the CPU of its backends for that
//! database is read beside Relay's own: SQLite's work is inside Relay's figure, PostgreSQL's is not.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use sqlx::Connection;

use crate::data::{FAST_MODEL, PROJECT, relay_leg};
use crate::load::{Generator, LoadResult, Pace, Target};
use crate::mock::Mock;
use crate::relay;
use crate::report::MaxRate;

use super::steps::{
    admin_token, check_leg, highest_rate_with_db, measured_with_db, secs, seed_notes, settle,
    start_relay,
};
use super::{Options, Scale};

/// The default server: the machine's own, trust authentication (as the tests use).
pub const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// What Relay did on PostgreSQL.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PostgresFigures {
    /// The server, without credentials.
    pub server: String,
    pub max: MaxRate,
    /// One fixed rate, the same as one of SQLite's fixed rates, for a same-rate comparison.
    pub rate: u32,
    pub at_rate: LoadResult,
    pub cpu_ms_per_leg_at_rate: f64,
    pub db_cpu_ms_per_leg_at_rate: Option<f64>,
}

/// A database of its own on the server, for one run.
pub struct FreshDb {
    admin: String,
    pub name: String,
    pub url: String,
}

impl FreshDb {
    pub async fn create(admin: &str) -> Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("relay_bench_{}_{nanos}", std::process::id());
        let mut conn = sqlx::PgConnection::connect(admin).await.with_context(|| {
            format!(
                "cannot reach PostgreSQL at {} (pass --postgres URL, or --no-postgres)",
                redacted(admin)
            )
        })?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .context("cannot create the benchmark database")?;
        let _ = conn.close().await;
        Ok(Self {
            url: with_database(admin, &name),
            admin: admin.to_owned(),
            name,
        })
    }

    /// FORCE ends the sessions a Relay that did not stop cleanly may have left.
    pub async fn drop_it(self) -> Result<()> {
        let mut conn = sqlx::PgConnection::connect(&self.admin).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&mut conn)
        .await?;
        let _ = conn.close().await;
        Ok(())
    }
}

/// `url` with its database name replaced by `name`; a query string is kept.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let authority = base.find("://").map_or(0, |i| i + 3);
    let server = base[authority..]
        .find('/')
        .map_or(base, |i| &base[..authority + i]);
    match query {
        Some(q) => format!("{server}/{name}?{q}"),
        None => format!("{server}/{name}"),
    }
}

/// The server part of a URL without user or password, for the report.
fn redacted(url: &str) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[authority..];
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    host.split(['/', '?']).next().unwrap_or_default().to_owned()
}

/// Runs the PostgreSQL stage against the server at `admin`; the database is dropped whatever
/// happens.
pub(super) async fn figures(
    opts: &Options,
    admin: &str,
    generator: &Generator,
    mock: &Mock,
    dir: &Path,
    http: &reqwest::Client,
    rate: u32,
) -> Result<PostgresFigures> {
    let db = FreshDb::create(admin).await?;
    let result = on_database(opts, &db, generator, mock, dir, http, rate).await;
    let dropped = db.drop_it().await;
    let mut figures = result?;
    dropped.context("cannot drop the benchmark database")?;
    figures.server = redacted(admin);
    Ok(figures)
}

async fn on_database(
    opts: &Options,
    db: &FreshDb,
    generator: &Generator,
    mock: &Mock,
    dir: &Path,
    http: &reqwest::Client,
    rate: u32,
) -> Result<PostgresFigures> {
    let scale: &Scale = &opts.scale;
    let config = relay::write_config_on(dir, &mock.base_url(), None, &db.url, "relay-pg.toml")?;
    let relay = start_relay(opts, &config, dir, http, 3).await?;
    let base = relay.base();
    let token = admin_token(opts, &config, http, &base).await?;
    seed_notes(http, &base, &token, scale.seed_notes).await?;
    check_leg(http, &base, &token).await?;
    let target = Target::post_json(
        format!("{base}/v1/agent/stream"),
        &relay_leg(FAST_MODEL, PROJECT),
    )
    .bearer(&token);
    generator
        .run(&target, Pace::Rate(rate.min(500)), secs(scale.warmup_secs))
        .await?;
    settle(relay.pid, Duration::from_secs(10)).await;
    let (at_rate, cpu, db_cpu) = measured_with_db(
        generator,
        &target,
        Pace::Rate(rate),
        secs(scale.rate_secs),
        relay.pid,
        Some(&db.name),
    )
    .await?;
    eprintln!(
        "  {rate} legs/s on PostgreSQL: p50 {:.3} p99 {:.3} ms, {cpu:.3} ms CPU/leg in Relay + {:.3} in PostgreSQL",
        at_rate.p50_ms,
        at_rate.p99_ms,
        db_cpu.unwrap_or(f64::NAN)
    );
    eprintln!("relay-bench: Relay on PostgreSQL, highest rate");
    let max = highest_rate_with_db(
        generator,
        &target,
        &scale.relay_ladder,
        scale.bisect_steps,
        secs(scale.step_secs),
        relay.pid,
        Some(&db.name),
    )
    .await?;
    relay.stop().await?;
    Ok(PostgresFigures {
        server: String::new(),
        max,
        rate,
        at_rate,
        cpu_ms_per_leg_at_rate: cpu,
        db_cpu_ms_per_leg_at_rate: db_cpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("postgres://u:p@h/postgres?sslmode=disable", "x"),
            "postgres://u:p@h/x?sslmode=disable"
        );
        assert_eq!(redacted("postgres://u:secret@db:5432/postgres"), "db:5432");
        assert_eq!(redacted(DEFAULT_ADMIN_URL), "127.0.0.1:5432");
    }
}
