//! Load generation: `oha` (the ecosystem tool the full run uses) or a small built-in generator
//! (smoke mode, or when oha is missing). Both pace requests open-loop at a fixed rate with latency
//! counted from each request's scheduled send time (oha's `--latency-correction`), so a stall
//! shows up in the percentiles instead of silently lowering the rate, and both read the whole body:
//! a leg's latency is the time to its last NDJSON or SSE line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;

/// One kind of request, repeated.
#[derive(Debug, Clone)]
pub struct Target {
    pub post: bool,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    /// Each request's body gets `{seq}` replaced by a counter (oha: one body per line of a file,
    /// `-Z`), so that every `remember` stores a new note instead of finding a duplicate.
    pub vary: bool,
    /// The built-in generator's counter for `{seq}`, shared by the clones of one target.
    seq: Arc<AtomicU64>,
}

impl Target {
    pub fn get(url: impl Into<String>) -> Self {
        Self {
            post: false,
            url: url.into(),
            headers: Vec::new(),
            body: None,
            vary: false,
            seq: Arc::default(),
        }
    }

    pub fn post_json(url: impl Into<String>, body: &Value) -> Self {
        Self {
            post: true,
            url: url.into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some(body.to_string().into_bytes()),
            vary: false,
            seq: Arc::default(),
        }
    }

    /// Makes every body unique (see `vary`).
    pub fn varied(mut self) -> Self {
        self.vary = true;
        self
    }

    pub fn bearer(mut self, token: &str) -> Self {
        self.headers
            .push(("authorization".into(), format!("Bearer {token}")));
        self
    }
}

/// How requests are sent.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// Open loop: this many requests per second whatever the answers do.
    Rate(u32),
    /// Closed loop: this many connections, each sending its next request when the last is done.
    Closed(u32),
}

/// The outcome of one load run. Latencies in milliseconds, over the successful (2xx) requests.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadResult {
    pub requests: u64,
    pub ok: u64,
    pub secs: f64,
    /// Successful requests per second.
    pub rps: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl LoadResult {
    pub fn success_ratio(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.ok as f64 / self.requests as f64
        }
    }

    /// Whether a run at `rate` held it: p99 under `p99_limit_ms`, 99.9 % answered 2xx, and at
    /// least 95 % of the asked rate actually served.
    pub fn held(&self, rate: u32, p99_limit_ms: f64) -> bool {
        self.ok > 0
            && self.p99_ms < p99_limit_ms
            && self.success_ratio() >= 0.999
            && self.rps >= 0.95 * f64::from(rate)
    }
}

/// The `q`-quantile of sorted values (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// p50, p90, p99 and max of `values` (sorted in place).
pub fn summarize(values: &mut [f64]) -> (f64, f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    (
        quantile(values, 0.50),
        quantile(values, 0.90),
        quantile(values, 0.99),
        values.last().copied().unwrap_or(f64::NAN),
    )
}

/// The load generator in use.
pub enum Generator {
    Oha {
        bin: PathBuf,
        scratch: PathBuf,
        version: String,
    },
    Builtin {
        client: reqwest::Client,
    },
}

impl Generator {
    /// oha at `bin`, writing request bodies under `scratch`.
    pub fn oha(bin: PathBuf, scratch: &Path) -> Result<Self> {
        let out = std::process::Command::new(&bin)
            .arg("--version")
            .output()
            .with_context(|| format!("cannot run {}", bin.display()))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok(Self::Oha {
            bin,
            scratch: scratch.to_owned(),
            version,
        })
    }

    pub fn builtin() -> Result<Self> {
        Ok(Self::Builtin {
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()?,
        })
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Oha { version, .. } => version.clone(),
            Self::Builtin { .. } => "built-in open-loop generator (reqwest)".into(),
        }
    }

    pub async fn run(&self, target: &Target, pace: Pace, duration: Duration) -> Result<LoadResult> {
        match self {
            Self::Oha { bin, scratch, .. } => run_oha(bin, scratch, target, pace, duration).await,
            Self::Builtin { client } => run_builtin(client, target, pace, duration).await,
        }
    }
}

/// Distinct bodies written for a varied target.
const VARIED_LINES: u64 = 200_000;

/// Connections oha keeps for an open-loop rate: enough that a slow spell queues in the server, not
/// in the client, and few enough not to swamp 2 cores with idle sockets.
fn connections_for(rate: u32) -> u32 {
    (rate / 10).clamp(32, 500)
}

async fn run_oha(
    bin: &Path,
    scratch: &Path,
    target: &Target,
    pace: Pace,
    duration: Duration,
) -> Result<LoadResult> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args([
        "--no-tui",
        "--output-format",
        "json",
        "--latency-correction",
    ])
    .arg("-z")
    .arg(format!("{}ms", duration.as_millis()))
    .arg("-m")
    .arg(if target.post { "POST" } else { "GET" });
    match pace {
        Pace::Rate(rate) => {
            cmd.arg("-q")
                .arg(rate.to_string())
                .arg("-c")
                .arg(connections_for(rate).to_string());
        }
        Pace::Closed(c) => {
            cmd.arg("-c").arg(c.to_string());
        }
    }
    for (k, v) in &target.headers {
        cmd.arg("-H").arg(format!("{k}: {v}"));
    }
    if let Some(body) = &target.body {
        // A file, not an argument: a suggest body with 200 history lines is long.
        let path = scratch.join(format!("body-{}-{}.json", body_key(body), target.vary));
        if target.vary {
            // One body per line, more lines than a run can send (oha starts over at the end).
            let template = String::from_utf8_lossy(body);
            let lines: Vec<String> = (0..VARIED_LINES)
                .map(|i| template.replace("{seq}", &i.to_string()))
                .collect();
            std::fs::write(&path, lines.join("\n"))?;
            cmd.arg("-Z").arg(path);
        } else {
            std::fs::write(&path, body)?;
            cmd.arg("-D").arg(path);
        }
    }
    cmd.arg(&target.url);
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "oha failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let json: Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "oha's output is not JSON: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    parse_oha(&json, duration)
}

fn body_key(body: &[u8]) -> u64 {
    // FNV-1a: a stable file name per distinct body.
    body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Reads oha's `-j` output: latencies in seconds, status codes and errors by count.
pub fn parse_oha(json: &Value, duration: Duration) -> Result<LoadResult> {
    let pct = &json["latencyPercentiles"];
    let ms = |v: &Value| v.as_f64().map_or(f64::NAN, |s| s * 1000.0);
    let statuses = json["statusCodeDistribution"]
        .as_object()
        .context("oha output has no statusCodeDistribution")?;
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    let ok: u64 = statuses
        .iter()
        .filter(|(code, _)| code.starts_with('2'))
        .map(|(_, n)| count(n))
        .sum();
    let answered: u64 = statuses.values().map(count).sum();
    // Requests cut off by the end of the run (`-z`) are not failures: they were still in flight.
    let errors: u64 = json["errorDistribution"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(what, _)| !what.contains("deadline"))
                .map(|(_, n)| count(n))
                .sum()
        })
        .unwrap_or(0);
    let secs = json["summary"]["total"]
        .as_f64()
        .unwrap_or(duration.as_secs_f64());
    Ok(LoadResult {
        requests: answered + errors,
        ok,
        secs,
        rps: if secs > 0.0 { ok as f64 / secs } else { 0.0 },
        p50_ms: ms(&pct["p50"]),
        p90_ms: ms(&pct["p90"]),
        p99_ms: ms(&pct["p99"]),
        max_ms: ms(&json["summary"]["slowest"]),
    })
}

/// One request, its body read to the end; `Some(latency from t0)` on a 2xx.
async fn one(client: &reqwest::Client, target: &Target, t0: Instant) -> Option<f64> {
    let mut req = if target.post {
        client.post(&target.url)
    } else {
        client.get(&target.url)
    };
    for (k, v) in &target.headers {
        req = req.header(k, v);
    }
    if let Some(body) = &target.body {
        req = if target.vary {
            let seq = target.seq.fetch_add(1, Ordering::Relaxed);
            req.body(String::from_utf8_lossy(body).replace("{seq}", &seq.to_string()))
        } else {
            req.body(body.clone())
        };
    }
    let mut resp = req.send().await.ok()?;
    let ok = resp.status().is_success();
    while let Ok(Some(_)) = resp.chunk().await {}
    ok.then(|| t0.elapsed().as_secs_f64() * 1000.0)
}

async fn run_builtin(
    client: &reqwest::Client,
    target: &Target,
    pace: Pace,
    duration: Duration,
) -> Result<LoadResult> {
    let target = Arc::new(target.clone());
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    match pace {
        Pace::Rate(rate) => {
            let gap = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
            let mut due = start;
            while due < end {
                tokio::time::sleep_until(due.into()).await;
                let (client, target) = (client.clone(), target.clone());
                // Latency from the scheduled time, not from when the task got to run.
                tasks.spawn(async move { vec![one(&client, &target, due).await] });
                due += gap;
            }
        }
        Pace::Closed(connections) => {
            for _ in 0..connections {
                let (client, target) = (client.clone(), target.clone());
                tasks.spawn(async move {
                    let mut out = Vec::new();
                    while Instant::now() < end {
                        out.push(one(&client, &target, Instant::now()).await);
                    }
                    out
                });
            }
        }
    }
    let mut latencies = Vec::new();
    let mut requests = 0u64;
    while let Some(done) = tasks.join_next().await {
        for r in done? {
            requests += 1;
            latencies.extend(r);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let ok = latencies.len() as u64;
    let (p50_ms, p90_ms, p99_ms, max_ms) = summarize(&mut latencies);
    Ok(LoadResult {
        requests,
        ok,
        secs,
        rps: ok as f64 / secs.max(duration.as_secs_f64()),
        p50_ms,
        p90_ms,
        p99_ms,
        max_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let (p50, p90, p99, max) = summarize(&mut v);
        assert_eq!((p50, p90, p99, max), (50.0, 90.0, 99.0, 100.0));
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn reads_oha_json() {
        let json = serde_json::json!({
            "summary": {"total": 2.0, "slowest": 0.004},
            "latencyPercentiles": {"p50": 0.001, "p90": 0.002, "p99": 0.003},
            "statusCodeDistribution": {"200": 98, "503": 1},
            "errorDistribution": {"aborted due to deadline": 5, "connection refused": 1}
        });
        let r = parse_oha(&json, Duration::from_secs(2)).unwrap();
        assert_eq!((r.requests, r.ok), (100, 98));
        assert!((r.p99_ms - 3.0).abs() < 1e-9 && (r.rps - 49.0).abs() < 1e-9);
        assert!(!r.held(50, 50.0), "1 % failed");
    }
}
