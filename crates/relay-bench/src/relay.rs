//! Relay under test: its configuration, started as the release binary (`relay serve`) in a child
//! process, or in-process on a runtime of its own (the smoke test, which has no release build);
//! readiness, the admin account and its token.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::data::{FAST_MODEL, SLOW_MODEL};

/// The benchmark account: admin, so its quota is unlimited.
pub const EMAIL: &str = "bench@example.com";
pub const PASSWORD: &str = "correct horse battery staple";

/// The start-up line `relay serve` logs, followed by the bound address.
const LISTENING: &str = "relay listening on ";

/// Writes the configuration: SQLite in `dir`, accounts on with production Argon2 costs, the mock as
/// the one provider (a fast model and a slow one), and per-caller limits high enough never to
/// refuse a benchmark leg.
pub fn write_config(dir: &Path, mock_base_url: &str) -> Result<PathBuf> {
    let db = dir.join("relay.db");
    let url = format!("sqlite://{}", db.display());
    write_config_on(dir, mock_base_url, None, &url, "relay.toml")
}

/// `write_config` with the memory and account stores at `store_url` (a PostgreSQL database for
/// the PostgreSQL rows), the mock's certificate trusted through `ca_file` when it serves HTTPS,
/// written to `file_name` in `dir`.
pub fn write_config_on(
    dir: &Path,
    mock_base_url: &str,
    ca_file: Option<&Path>,
    url: &str,
    file_name: &str,
) -> Result<PathBuf> {
    // A JSON string is a TOML basic string, escapes included.
    let ca_line = ca_file.map_or(String::new(), |ca| {
        format!(
            "ca_file = {}\n",
            serde_json::Value::String(ca.display().to_string())
        )
    });
    let config = format!(
        r#"bind = "127.0.0.1:0"

[memory]
url = "{url}"

[auth]
url = "{url}"
signup = "closed"

[[providers]]
name = "mock"
kind = "openai"
base_url = "{mock_base_url}"
{ca_line}
[[models]]
name = "{FAST_MODEL}"
provider = "mock"
upstream = "{FAST_MODEL}"

[[models]]
name = "{SLOW_MODEL}"
provider = "mock"
upstream = "{SLOW_MODEL}"

[routing]
auto = ["{FAST_MODEL}"]

[limits]
agent_per_minute = 100000000
agent_burst = 10000000
suggest_per_minute = 100000000
suggest_burst = 10000000
"#
    );
    let path = dir.join(file_name);
    std::fs::write(&path, config)?;
    Ok(path)
}

/// Turns on `[memory] embeddings` in the configuration at `path`, served at `base_url` (an
/// OpenAI-compatible `/v1`) by a provider of its own.
pub fn add_embeddings(path: &Path, base_url: &str) -> Result<()> {
    let text = std::fs::read_to_string(path)?;
    let text = text.replacen(
        "\n[auth]\n",
        "embeddings = { provider = \"embedder\", model = \"all-MiniLM-L6-v2\" }\n\n[auth]\n",
        1,
    );
    let provider = format!(
        "\n[[providers]]\nname = \"embedder\"\nkind = \"openai\"\nbase_url = {}\n",
        serde_json::Value::String(base_url.to_owned())
    );
    std::fs::write(path, text + &provider)?;
    Ok(())
}

/// How Relay runs.
enum Kind {
    Child {
        child: tokio::process::Child,
        log: PathBuf,
    },
    InProcess {
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

/// A running Relay.
pub struct Running {
    pub addr: SocketAddr,
    pub pid: u32,
    /// From the spawn (or the in-process start) to the first `/readyz` 200.
    pub ready_ms: f64,
    kind: Kind,
}

impl Running {
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn in_process(&self) -> bool {
        matches!(self.kind, Kind::InProcess { .. })
    }

    /// Starts `bin serve --config config`, its log in `log`; waits for the start-up line, then
    /// polls `/readyz` until it answers 200.
    pub async fn start_child(
        bin: &Path,
        config: &Path,
        log: &Path,
        http: &reqwest::Client,
    ) -> Result<Self> {
        let log_file = std::fs::File::create(log)?;
        let started = Instant::now();
        let child = tokio::process::Command::new(bin)
            .arg("serve")
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // To a file, not a pipe: under load Relay logs a line per request, and a pipe the
            // harness has to drain would put the harness into the measured path.
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let pid = child.id().context("relay exited at once")?;
        let mut running = Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            pid,
            ready_ms: 0.0,
            kind: Kind::Child {
                child,
                log: log.to_owned(),
            },
        };
        running.addr = running.wait_listening(log).await?;
        wait_ready(http, &running.base(), Duration::from_secs(30)).await?;
        running.ready_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(running)
    }

    /// Polls the log for the start-up line (every millisecond, up to 30 s).
    async fn wait_listening(&mut self, log: &Path) -> Result<SocketAddr> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if let Some(rest) = text.split(LISTENING).nth(1) {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                return addr.parse().with_context(|| {
                    format!("cannot read the address in the start-up line: {addr}")
                });
            }
            if let Kind::Child { child, .. } = &mut self.kind
                && let Some(status) = child.try_wait()?
            {
                bail!("relay exited ({status}) before listening:\n{}", tail(&text));
            }
            if Instant::now() > deadline {
                bail!(
                    "relay did not log its start-up line within 30 s:\n{}",
                    tail(&text)
                );
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Runs Relay in this process on a multi-threaded runtime of its own thread, from the same
    /// configuration file the binary would read.
    pub async fn start_in_process(config: &Path, http: &reqwest::Client) -> Result<Self> {
        let started = Instant::now();
        let config = relay_server::Config::load(Some(config), &relay_server::config::ProcessEnv)?;
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel::<Result<SocketAddr, String>>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("bench-relay".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("bench-relay-worker")
                    .enable_all()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = addr_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let setup = async {
                        let listener = tokio::net::TcpListener::bind(config.bind).await?;
                        let addr = listener.local_addr()?;
                        let relay = relay_server::Relay::from_config(config).await?;
                        anyhow::Ok((listener, addr, relay))
                    };
                    match setup.await {
                        Ok((listener, addr, relay)) => {
                            let _ = addr_tx.send(Ok(addr));
                            let shutdown = async {
                                let _ = stopped.await;
                            };
                            if let Err(e) =
                                relay_server::serve(listener, relay.router(), shutdown).await
                            {
                                eprintln!("in-process relay: {e}");
                            }
                        }
                        Err(e) => {
                            let _ = addr_tx.send(Err(format!("{e:#}")));
                        }
                    }
                });
            })?;
        let addr = addr_rx
            .await
            .context("the in-process relay thread ended")?
            .map_err(anyhow::Error::msg)?;
        let mut running = Self {
            addr,
            pid: std::process::id(),
            ready_ms: 0.0,
            kind: Kind::InProcess {
                stop: Some(stop),
                thread: Some(thread),
            },
        };
        wait_ready(http, &running.base(), Duration::from_secs(30)).await?;
        running.ready_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(running)
    }

    /// SIGTERM (Relay drains and exits), then waits; a child that does not leave in 10 s is killed.
    pub async fn stop(mut self) -> Result<()> {
        match &mut self.kind {
            Kind::Child { child, .. } => {
                if let Some(pid) = child.id() {
                    let _ = tokio::process::Command::new("kill")
                        .arg("-TERM")
                        .arg(pid.to_string())
                        .status()
                        .await;
                }
                if tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_err()
                {
                    child.kill().await?;
                }
            }
            Kind::InProcess { stop, thread } => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
                if let Some(thread) = thread.take() {
                    tokio::task::spawn_blocking(move || thread.join())
                        .await?
                        .map_err(|_| anyhow::anyhow!("the in-process relay panicked"))?;
                }
            }
        }
        Ok(())
    }

    /// The last lines of the log, for error messages.
    pub fn log_tail(&self) -> String {
        match &self.kind {
            Kind::Child { log, .. } => tail(&std::fs::read_to_string(log).unwrap_or_default()),
            Kind::InProcess { .. } => String::new(),
        }
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Polls `GET /readyz` (every millisecond) until it answers 200.
pub async fn wait_ready(http: &reqwest::Client, base: &str, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    let url = format!("{base}/readyz");
    loop {
        if let Ok(r) = http.get(&url).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{url} did not answer 200 within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Creates the admin account: `relay users add EMAIL --role admin` with the password on standard
/// input, or the same library call in-process.
pub async fn add_admin(bin: Option<&Path>, config: &Path) -> Result<()> {
    match bin {
        Some(bin) => {
            let mut child = tokio::process::Command::new(bin)
                .arg("users")
                .arg("add")
                .arg(EMAIL)
                .arg("--role")
                .arg("admin")
                .arg("--config")
                .arg(config)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            if let Some(mut stdin) = child.stdin.take() {
                use tokio::io::AsyncWriteExt;
                stdin.write_all(format!("{PASSWORD}\n").as_bytes()).await?;
            }
            let out = child.wait_with_output().await?;
            if !out.status.success() {
                bail!(
                    "relay users add failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        None => {
            let config =
                relay_server::Config::load(Some(config), &relay_server::config::ProcessEnv)?;
            let users = relay_server::operator::Users::open(config).await?;
            users
                .add(
                    EMAIL,
                    Some("admin"),
                    None,
                    format!("{PASSWORD}\n").as_bytes(),
                )
                .await?;
        }
    }
    Ok(())
}

/// Signs the admin in and returns its token.
pub async fn sign_in(http: &reqwest::Client, base: &str) -> Result<String> {
    let resp = http
        .post(format!("{base}/v1/auth/signin"))
        .json(&json!({"email": EMAIL, "password": PASSWORD}))
        .send()
        .await?;
    let status = resp.status();
    let body: Value = resp.json().await?;
    if !status.is_success() {
        bail!("signin answered {status}: {body}");
    }
    if body["limit"] != json!(-1) {
        bail!("the benchmark account is not unlimited: {body}");
    }
    body["token"]
        .as_str()
        .map(str::to_owned)
        .context("signin answered no token")
}
