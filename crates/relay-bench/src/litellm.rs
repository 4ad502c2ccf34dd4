//! The LiteLLM proxy in front of the same mock, for the side-by-side figures: installed from PyPI
//! into `bench/.venv` by `bench/run.sh`, started here with a one-model configuration, offline.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rustix::process::{Pid, Signal};

use crate::data::{FAST_MODEL, openai_leg};

/// A fresh master key per run (`sk-` and 64 hex digits, LiteLLM's own advice): recent LiteLLM
/// refuses to start without one, and with it every request is authenticated, as Relay's are.
fn master_key() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(format!(
        "sk-{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

/// A running LiteLLM proxy (its own process group, so its workers stop with it).
pub struct LiteLlm {
    pub addr: SocketAddr,
    pub pid: u32,
    pub workers: u32,
    pub version: String,
    pub ready_ms: f64,
    /// The master key: what requests send as their Bearer token.
    pub key: String,
    child: tokio::process::Child,
    stopped: bool,
    log: PathBuf,
}

/// The `litellm` script of the virtual environment `bench/run.sh` makes.
pub fn default_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/.venv/bin/litellm")
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl LiteLlm {
    /// Writes the configuration (one model, `openai/<name>` at the mock) and starts the proxy with
    /// one worker per core, as LiteLLM's production guide advises; waits until a streamed request
    /// through it answers 200.
    pub async fn start(
        bin: &Path,
        dir: &Path,
        mock_base_url: &str,
        http: &reqwest::Client,
    ) -> Result<Self> {
        let config = dir.join("litellm.yaml");
        std::fs::write(
            &config,
            format!(
                "model_list:\n  - model_name: {FAST_MODEL}\n    litellm_params:\n      model: openai/{FAST_MODEL}\n      api_base: {mock_base_url}\n      api_key: dummy\n"
            ),
        )?;
        let workers =
            u32::try_from(std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
                .unwrap_or(1);
        let port = free_port()?;
        let log = dir.join("litellm.log");
        let version = std::process::Command::new(bin.with_file_name("python"))
            .args([
                "-c",
                "import importlib.metadata as m; print(m.version('litellm'))",
            ])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        let key = master_key()?;
        let started = Instant::now();
        let child = tokio::process::Command::new(bin)
            .arg("--config")
            .arg(&config)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--num_workers", &workers.to_string()])
            // uvicorn kills a worker that has not answered its health check in time (5 s by
            // default); importing LiteLLM takes longer than that on a busy 2-core machine.
            .args(["--timeout_worker_healthcheck", "300"])
            .env("LITELLM_MASTER_KEY", &key)
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_TELEMETRY", "False")
            .env("NO_DOCS", "True")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(std::fs::File::create(dir.join("litellm.err.log"))?)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let pid = child.id().context("litellm exited at once")?;
        let mut proxy = Self {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            pid,
            workers,
            version,
            ready_ms: 0.0,
            key,
            child,
            stopped: false,
            log,
        };
        proxy.wait_ready(http, Duration::from_secs(300)).await?;
        proxy.ready_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(proxy)
    }

    pub fn url(&self) -> String {
        format!("http://{}/v1/chat/completions", self.addr)
    }

    /// Polls with a real streamed request (every 100 ms): the health routes answer before the
    /// model list is loaded.
    async fn wait_ready(&mut self, http: &reqwest::Client, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        let body = openai_leg(FAST_MODEL);
        loop {
            let answer = http
                .post(self.url())
                .bearer_auth(&self.key)
                .json(&body)
                .timeout(Duration::from_secs(10))
                .send()
                .await;
            if let Ok(r) = answer
                && r.status().is_success()
                && r.text().await.is_ok_and(|t| t.contains("[DONE]"))
            {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("litellm exited ({status}):\n{}", self.log_tail());
            }
            if Instant::now() > deadline {
                bail!(
                    "litellm was not ready within {within:?}:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn log_tail(&self) -> String {
        let mut text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.push_str(
            &std::fs::read_to_string(self.log.with_file_name("litellm.err.log"))
                .unwrap_or_default(),
        );
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGTERM to the whole process group (the proxy and its workers), then waits; killed after 10 s.
    pub async fn stop(mut self) -> Result<()> {
        signal_group(self.pid, Signal::TERM);
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            signal_group(self.pid, Signal::KILL);
            self.child.kill().await?;
        }
        // Workers that outlived their parent go with the group.
        signal_group(self.pid, Signal::KILL);
        self.stopped = true;
        Ok(())
    }
}

/// Sends `signal` to the process group `pgid` by the system call itself. Not through the `kill`
/// program: procps-ng 4.0.2's (Debian 12's) reads `kill -TERM -PGID` as `kill(-1, SIGTERM)`, which
/// as root ends every process on the machine (seen: the database server, the shell running the
/// benchmark); it takes the group only after `--`.
fn signal_group(pgid: u32, signal: Signal) {
    let Some(pgid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return;
    };
    // A group already gone is what stopping wants.
    let _ = rustix::process::kill_process_group(pgid, signal);
}

impl Drop for LiteLlm {
    /// A run that fails or is interrupted still ends the proxy's whole process group (its
    /// workers are not covered by `kill_on_drop`, which ends only the parent).
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.pid, Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper_in_own_group() -> std::process::Child {
        use std::os::unix::process::CommandExt as _;
        std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap()
    }

    /// The signal reaches the named group and nothing else (the `kill` program sent it to every
    /// process, this test's own included).
    #[test]
    fn a_group_signal_ends_that_group_only() {
        let mut target = sleeper_in_own_group();
        let mut bystander = sleeper_in_own_group();
        signal_group(target.id(), Signal::TERM);
        let status = target.wait().unwrap();
        assert!(!status.success(), "the group's process was ended");
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "another group runs on"
        );
        bystander.kill().unwrap();
        bystander.wait().unwrap();
    }
}
