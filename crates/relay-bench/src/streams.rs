//! Many concurrent open legs against the slow model: every leg gets its `start` line and then
//! stays open (the mock never finishes it), and Relay's resident memory is read with all of them
//! open. Each open leg holds two sockets in Relay (client and upstream) when the upstream is
//! plain HTTP/1.1, one (the client's) when it is HTTPS with HTTP/2 and legs share connections;
//! the open-file limit bounds how many can be open at once, and the harness says so when it had
//! to open fewer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::data::{SLOW_MODEL, STREAMS_PROJECT, relay_leg};

#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamsResult {
    pub requested: usize,
    pub opened: usize,
    pub failed: usize,
    /// Why fewer than requested were tried, if so.
    pub capped_by: Option<String>,
    pub open_secs: f64,
    pub rss_before_kib: u64,
    pub rss_open_kib: u64,
    pub rss_after_kib: u64,
    /// `relay_agent_active_streams` from `/metrics` with all open: Relay's own count.
    pub active_streams_metric: Option<f64>,
    /// (RSS open − RSS before) ÷ opened.
    pub bytes_per_stream: f64,
}

impl StreamsResult {
    /// One line for the harness's progress output.
    pub fn summary(&self) -> String {
        format!(
            "{} open: RSS {} → {} KiB, {:.0} bytes per stream",
            self.opened, self.rss_before_kib, self.rss_open_kib, self.bytes_per_stream
        )
    }
}

/// The sockets an open leg holds in the measured process, by how it reaches the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sockets {
    /// Plain HTTP/1.1 upstream: the client's connection and one upstream connection per leg.
    TwoPerLeg,
    /// HTTPS upstream with HTTP/2: the client's connection, and a hundredth of an upstream
    /// connection (100 legs share one).
    OnePerLeg,
}

impl Sockets {
    /// Which of the two a leg to the upstream at `base_url` holds.
    pub fn for_upstream(base_url: &str) -> Self {
        if base_url.starts_with("https://") {
            Self::OnePerLeg
        } else {
            Self::TwoPerLeg
        }
    }

    /// Descriptors per leg, in hundredths.
    fn hundredths(self) -> u64 {
        match self {
            Self::TwoPerLeg => 200,
            Self::OnePerLeg => 101,
        }
    }
}

/// How many more legs Relay can hold open: each takes `per_leg_hundredths` / 100 descriptors out
/// of what its soft limit leaves beside the ones it has open already, less a margin for the
/// database files and the `/metrics` reads. `None` (no `/proc`) does not cap.
pub fn max_streams_for_nofile(nofile: Option<(u64, u64)>, per_leg_hundredths: u64) -> usize {
    nofile.map_or(usize::MAX, |(soft, open)| {
        usize::try_from(soft.saturating_sub(open + 16) * 100 / per_leg_hundredths)
            .unwrap_or(usize::MAX)
    })
}

/// Opens `requested` legs (fewer if Relay's open-file limit says so), waits until every one has
/// its `start` line, reads Relay's RSS, then closes them all. `relay_pid` is Relay's process;
/// when it is this process (Relay in-process), each leg's client socket counts against the same
/// limit too. `sockets` says how many an open leg holds in Relay.
pub async fn hold_open(
    base: &str,
    token: &str,
    requested: usize,
    relay_pid: u32,
    sockets: Sockets,
) -> Result<StreamsResult> {
    let rss = || crate::procfs::rss_kib(relay_pid);
    let in_process = if relay_pid == std::process::id() {
        100
    } else {
        0
    };
    let per_leg = sockets.hundredths() + in_process;
    let nofile = crate::procfs::nofile_of(relay_pid);
    let n = requested.min(max_streams_for_nofile(nofile, per_leg));
    let capped_by = (n < requested).then(|| {
        format!(
            "Relay's open-file limit ({} per process, the hard limit here, which `ulimit -Hn`/`prlimit` cannot raise without CAP_SYS_RESOURCE; each open leg holds {} sockets in Relay's process)",
            nofile.map_or(0, |(soft, _)| soft),
            per_leg as f64 / 100.0
        )
    });
    // One connection per leg, never pooled: the point is n concurrent connections.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?;
    let url = format!("{base}/v1/agent/stream");
    let body = relay_leg(SLOW_MODEL, STREAMS_PROJECT).to_string();
    let rss_before_kib = rss()?;

    let opening = Arc::new(tokio::sync::Semaphore::new(256));
    let opened = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let progress = Arc::new(tokio::sync::Notify::new());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (client, url, body, token) =
            (client.clone(), url.clone(), body.clone(), token.to_owned());
        let (opening, opened, failed, progress) = (
            opening.clone(),
            opened.clone(),
            failed.clone(),
            progress.clone(),
        );
        let mut stop = stop_rx.clone();
        tasks.spawn(async move {
            // Bounded opening: thousands of simultaneous connects would overflow the listen
            // backlog and measure SYN retries instead of Relay.
            let permit = opening.acquire_owned().await;
            let resp = open_one(&client, &url, &body, &token).await;
            drop(permit);
            let mut resp = match resp {
                Ok(r) => {
                    opened.fetch_add(1, Ordering::Relaxed);
                    progress.notify_one();
                    r
                }
                Err(e) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    progress.notify_one();
                    return Err(e);
                }
            };
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    chunk = resp.chunk() => match chunk {
                        Ok(Some(_)) => {}
                        _ => break,
                    },
                }
            }
            Ok(())
        });
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    while opened.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed) < n {
        if Instant::now() > deadline {
            bail!(
                "only {} of {n} legs opened within 300 s",
                opened.load(Ordering::Relaxed)
            );
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), progress.notified()).await;
    }
    let open_secs = started.elapsed().as_secs_f64();
    let rss_open_kib = rss()?;
    let active_streams_metric = active_streams(&client, base).await;
    let _ = stop_tx.send(true);
    let mut first_error = None;
    while let Some(r) = tasks.join_next().await {
        if let Err(e) = r? {
            first_error.get_or_insert(e);
        }
    }
    let opened = opened.load(Ordering::Relaxed);
    let failed = failed.load(Ordering::Relaxed);
    if opened == 0 {
        return Err(first_error.unwrap_or_else(|| anyhow::anyhow!("no leg opened")));
    }
    if let Some(e) = &first_error {
        eprintln!("open-stream test: {failed} legs failed; first error: {e:#}");
    }
    // Relay notices the closed connections asynchronously; its RSS after is read once its own
    // count of active streams is back to zero (polled, up to 10 s).
    let settle = Instant::now() + Duration::from_secs(10);
    while active_streams(&client, base).await.unwrap_or(0.0) > 0.0 && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rss_after_kib = rss()?;
    Ok(StreamsResult {
        requested,
        opened,
        failed,
        capped_by,
        open_secs,
        rss_before_kib,
        rss_open_kib,
        rss_after_kib,
        active_streams_metric,
        bytes_per_stream: (rss_open_kib.saturating_sub(rss_before_kib) as f64 * 1024.0)
            / opened as f64,
    })
}

/// Sends one leg and reads until its first line, which must be `start`.
async fn open_one(
    client: &reqwest::Client,
    url: &str,
    body: &str,
    token: &str,
) -> Result<reqwest::Response> {
    let mut resp = client
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await?;
    if !resp.status().is_success() {
        let status = resp.status();
        bail!(
            "the leg answered {status}: {}",
            resp.text().await.unwrap_or_default()
        );
    }
    let mut head = Vec::new();
    while !head.contains(&b'\n') {
        let chunk = resp
            .chunk()
            .await?
            .context("the leg ended before its start line")?;
        head.extend_from_slice(&chunk);
    }
    if !head.starts_with(br#"{"event":"start""#) {
        bail!(
            "the first line is not start: {}",
            String::from_utf8_lossy(&head)
        );
    }
    Ok(resp)
}

/// `relay_agent_active_streams` from `/metrics`.
pub async fn active_streams(client: &reqwest::Client, base: &str) -> Option<f64> {
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find(|l| l.starts_with("relay_agent_active_streams"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_per_leg() {
        assert_eq!(max_streams_for_nofile(Some((20_000, 40)), 200), 9_972);
        assert_eq!(max_streams_for_nofile(Some((20_000, 40)), 300), 6_648);
        // HTTP/2 upstream: 10,000 legs fit under 20,000 descriptors.
        assert_eq!(max_streams_for_nofile(Some((20_000, 40)), 101), 19_746);
        assert_eq!(max_streams_for_nofile(None, 200), usize::MAX);
    }

    #[test]
    fn https_upstreams_share_connections() {
        assert_eq!(
            Sockets::for_upstream("https://127.0.0.1:9/v1"),
            Sockets::OnePerLeg
        );
        assert_eq!(
            Sockets::for_upstream("http://127.0.0.1:9/v1"),
            Sockets::TwoPerLeg
        );
    }
}
