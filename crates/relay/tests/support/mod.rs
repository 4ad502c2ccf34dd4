//! The one `relay serve` harness of the binary's tests: a child process started from a
//! configuration file on port 0, ready once its start-up line names the address (no sleeping),
//! its log collected, and killed when dropped.

#![allow(dead_code, reason = "each test binary uses a part of the harness")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_relay");

/// Variables that would change what a child does: provider keys (the demo provider must answer)
/// and bind or store overrides (the configuration file must decide).
const SCRUBBED: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "RELAY_CONFIG",
    "RELAY_BIND",
    "RELAY_MEMORY_URL",
    "RELAY_AUTH_URL",
];

/// The `relay` binary with the variables above removed from its environment: the test build, or
/// the one `RELAY_SERVE_BIN` names (a release build, to run the same tests against it by hand).
pub fn relay_command() -> Command {
    let bin = std::env::var("RELAY_SERVE_BIN").unwrap_or_else(|_| BIN.to_owned());
    let mut cmd = Command::new(bin);
    for var in SCRUBBED {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs `relay --config <config> <args…>` to its end, with `stdin` as its input.
pub fn relay(config: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = relay_command()
        .arg("--config")
        .arg(config)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Writes `text` as `dir/relay.toml`.
pub fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("relay.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A configuration on port 0 with accounts and notes in `dir/relay.db` and cheap hashing;
/// `extra` follows the `[auth]` table (so bare keys land in it).
pub fn sqlite_config(dir: &Path, extra: &str) -> PathBuf {
    let db = dir.join("relay.db");
    write_config(
        dir,
        &format!(
            "bind = \"127.0.0.1:0\"\n[memory]\nurl = \"sqlite://{db}\"\n[auth]\nurl = \"sqlite://{db}\"\n\
             argon2_memory_kib = 256\nargon2_iterations = 1\n{extra}",
            db = db.display()
        ),
    )
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// How a `relay serve` child is started, before it is.
pub struct ServeBuilder {
    cmd: Command,
}

impl ServeBuilder {
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub fn current_dir(mut self, dir: &Path) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// Starts the process without waiting, so several can start at once. Its standard output
    /// (where it prints its addresses) is kept for [`Serve::stdout`].
    pub fn spawn(mut self) -> Starting {
        let mut child = self
            .cmd
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let out = Arc::new(Mutex::new(String::new()));
        let sink = out.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                push_line(&sink, &line);
            }
        });
        Starting { child, stderr, out }
    }

    /// Starts the process and waits until it listens.
    pub fn start(self) -> Serve {
        self.spawn().ready()
    }
}

/// A `relay serve` child that may not listen yet.
pub struct Starting {
    child: Child,
    stderr: ChildStderr,
    out: Arc<Mutex<String>>,
}

impl Starting {
    /// Reads the log until `relay listening on ADDR`; the rest is drained (so the server never
    /// blocks on a full pipe) and kept for [`Serve::log`].
    pub fn ready(self) -> Serve {
        let Starting {
            mut child,
            stderr,
            out,
        } = self;
        let mut lines = BufReader::new(stderr).lines();
        let log = Arc::new(Mutex::new(String::new()));
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "relay serve exited before listening:\n{}",
                    log.lock().unwrap()
                );
            };
            push_line(&log, &line);
            if let Some(rest) = line.split("relay listening on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
        };
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                push_line(&sink, &line);
            }
        });
        Serve {
            child,
            base: format!("http://{addr}"),
            log,
            out,
            reader: Some(reader),
        }
    }
}

fn push_line(log: &Mutex<String>, line: &str) {
    let mut log = log.lock().unwrap();
    log.push_str(line);
    log.push('\n');
}

/// A listening `relay serve` child.
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    log: Arc<Mutex<String>>,
    out: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Serve {
    /// `relay --config <config> serve`, logging at `info`; [`ServeBuilder`] adds to it.
    pub fn builder(config: &Path) -> ServeBuilder {
        let mut cmd = relay_command();
        cmd.arg("--config")
            .arg(config)
            .arg("serve")
            .env("RELAY_LOG", "info");
        ServeBuilder { cmd }
    }

    /// Starts `relay serve` on `config` and waits until it listens.
    pub fn start(config: &Path) -> Self {
        Self::builder(config).start()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The status of `GET /healthz` (from outside any runtime).
    pub fn healthz(&self) -> u16 {
        runtime().block_on(async {
            reqwest::Client::new()
                .get(format!("{}/healthz", self.base))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// What it printed on standard output so far.
    pub fn stdout(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// Polls the log until it passes `check`, for at most `within`; the log it passed on.
    pub fn wait_log(&self, within: Duration, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let log = self.log();
            if check(&log) {
                return log;
            }
            assert!(Instant::now() < deadline, "the log never showed it:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM through the `kill` command, so the tests need no unsafe code.
    pub fn sigterm(&self) {
        self.signal("-TERM");
    }

    /// SIGINT, as ctrl-c in its terminal sends.
    pub fn sigint(&self) {
        self.signal("-INT");
    }

    fn signal(&self, which: &str) {
        let status = Command::new("kill")
            .arg(which)
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Whether it has ended (without waiting).
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
    }

    /// Waits up to `within` for the process to end by itself.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "relay did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then everything it logged once it has ended.
    pub fn stop(mut self) -> String {
        self.sigterm();
        self.child.wait().unwrap();
        // The reader ends when the pipe closes, so its join holds the log's tail.
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        self.log()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
