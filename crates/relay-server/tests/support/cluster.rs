//! A private PostgreSQL cluster for tests that stop and start the server, and the helpers they
//! share. The machine's shared server is never touched: initdb + pg_ctl in a temporary directory,
//! as the `postgres` OS user when the tests run as root, since initdb refuses root.

#![allow(dead_code, reason = "each test binary uses its own part")]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// A throw-away PostgreSQL cluster in a temporary directory, on a port of its own.
pub struct Cluster {
    dir: tempfile::TempDir,
    pub port: u16,
    /// Running as root: every PostgreSQL command goes through `runuser -u postgres`.
    as_postgres: bool,
}

impl Cluster {
    pub fn create() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let as_postgres = std::fs::metadata("/proc/self").unwrap().uid() == 0;
        if as_postgres {
            let (uid, gid) = postgres_ids();
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cluster = Self {
            dir,
            port,
            as_postgres,
        };
        let data = cluster.data();
        cluster.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
            ],
        );
        cluster
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Runs a PostgreSQL program to completion; panics with its output when it fails.
    pub fn run(&self, program: &str, args: &[&str]) {
        let bin = Path::new(PG_BIN).join(program);
        assert!(
            bin.exists(),
            "{} is missing: this test needs PostgreSQL 15's server binaries",
            bin.display()
        );
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        let out = cmd.args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the server and waits (`-w`) until it accepts connections.
    pub fn start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log");
        let data = self.data();
        self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
    }

    /// A fast shutdown, as an operator's restart does: sessions are ended, in-flight statements
    /// fail, and new connections are refused until `start`.
    pub fn stop(&self) {
        let data = self.data();
        self.run(
            "pg_ctl",
            &["-D", data.to_str().unwrap(), "-m", "fast", "-w", "stop"],
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        let bin = Path::new(PG_BIN).join("pg_ctl");
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        let _ = cmd
            .args([
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .output();
    }
}

/// The `postgres` OS user's uid and gid, from /etc/passwd.
fn postgres_ids() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("running as root needs a `postgres` OS user to run initdb as");
    let fields: Vec<&str> = line.split(':').collect();
    (fields[2].parse().unwrap(), fields[3].parse().unwrap())
}

/// No provider keys from the machine's environment.
pub struct NoEnv;

impl relay_server::config::Env for NoEnv {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

pub async fn json_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")),
    )
}

/// Asserts a 503 `store_unavailable` whose body, without `error` and `message`, is `shape`.
pub fn assert_unavailable(status: u16, mut body: Value, shape: Value) {
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "store_unavailable", "{body}");
    let message = body["message"].as_str().unwrap().to_owned();
    assert!(
        !message.contains("127.0.0.1") && !message.to_lowercase().contains("sqlx"),
        "internal detail leaked: {message}"
    );
    let obj = body.as_object_mut().unwrap();
    obj.remove("error");
    obj.remove("message");
    assert_eq!(body, shape);
}

/// Polls `done` every 50 ms for at most `limit`.
pub async fn eventually(limit: Duration, what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
