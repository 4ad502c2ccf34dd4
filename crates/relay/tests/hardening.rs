//! Issue 12 (items 2 and 10) against the real binary: memory under a signup flood, bounded
//! graceful shutdown, configuration errors as written, and the README's defaults block.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_relay");

/// A `relay serve` child; the port comes from its start-up line, so no sleeping.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(config: &Path, cwd: &Path, envs: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(BIN);
        cmd.arg("--config")
            .arg(config)
            .arg("serve")
            .current_dir(cwd);
        for var in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "RELAY_CONFIG",
            "RELAY_BIND",
            "RELAY_MEMORY_URL",
            "RELAY_AUTH_URL",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("RELAY_LOG", "info");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let addr = loop {
            let Some(line) = lines.next() else {
                panic!("relay serve exited before listening:\n{seen}");
            };
            let line = line.unwrap();
            seen.push_str(&line);
            seen.push('\n');
            if let Some(rest) = line.split("relay listening on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            base: format!("http://{addr}"),
        }
    }

    /// A field of `/proc/PID/status` in kB (`VmHWM` is the peak resident set).
    fn status_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {status}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("relay.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_signup_flood_keeps_peak_memory_under_300_mb() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    // Production Argon2id costs (19 MiB a hash); the per-address limit raised so only the
    // hashing pool stands between the flood and the allocator.
    let config = write(
        dir.path(),
        &format!(
            "bind = \"127.0.0.1:0\"\n[memory]\nurl = \"sqlite://{db}\"\n[auth]\nurl = \"sqlite://{db}\"\n\
             [limits]\nsignups_per_hour = 100000\n",
            db = db.display()
        ),
    );
    let server = Server::start(&config, dir.path(), &[]);
    let before = server.status_kb("VmRSS");
    let statuses: Vec<(u16, bool)> = runtime().block_on(async {
        let client = reqwest::Client::new();
        let mut tasks = Vec::new();
        for i in 0..150 {
            let (client, url) = (client.clone(), format!("{}/v1/auth/signup", server.base));
            tasks.push(tokio::spawn(async move {
                let r = client
                    .post(url)
                    .json(&json!({"email": format!("flood{i}@example.com"), "password": "long enough password"}))
                    .send()
                    .await
                    .unwrap();
                (r.status().as_u16(), r.headers().contains_key("retry-after"))
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    let peak_kb = server.status_kb("VmHWM");
    let ok = statuses.iter().filter(|(s, _)| *s == 200).count();
    let refused = statuses
        .iter()
        .filter(|(s, retry)| *s == 429 && *retry)
        .count();
    eprintln!(
        "150 concurrent signups: {ok} created, {refused} refused with Retry-After; RSS before {before} kB, peak {peak_kb} kB"
    );
    assert!(ok >= 1, "{statuses:?}");
    assert_eq!(ok + refused, statuses.len(), "{statuses:?}");
    assert!(peak_kb < 300 * 1024, "peak RSS {peak_kb} kB");
    // Still serving, and the accounts it accepted work.
    let r = runtime().block_on(async {
        reqwest::Client::new()
            .get(format!("{}/healthz", server.base))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert_eq!(r, 200);
}

/// An OpenAI-compatible upstream that streams one piece of text and then never finishes.
fn stalling_provider() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Detached: it holds every connection open and dies with the test process.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut buf = vec![0u8; 65536];
            let _ = stream.read(&mut buf);
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": "hello"}}]});
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\ndata: {chunk}\n\n"
            );
            let _ = stream.flush();
            held.push(stream);
        }
    });
    format!("http://{addr}/v1")
}

#[test]
fn shutdown_ends_an_open_leg_with_one_retryable_error_line_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("relay.db");
    let config = write(
        dir.path(),
        &format!(
            "bind = \"127.0.0.1:0\"\nshutdown_grace_ms = 300\n[memory]\nurl = \"sqlite://{db}\"\n\
             [[providers]]\nname = \"stall\"\nkind = \"openai\"\nbase_url = \"{base}\"\n\
             [[models]]\nname = \"m\"\nprovider = \"stall\"\nupstream = \"x\"\n[routing]\nauto = [\"m\"]\n",
            db = db.display(),
            base = stalling_provider()
        ),
    );
    let mut server = Server::start(&config, dir.path(), &[]);
    let lines = runtime().block_on(async {
        let mut r = reqwest::Client::new()
            .post(format!("{}/v1/agent/stream", server.base))
            .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let mut text = String::new();
        let mut signalled = false;
        // The upstream would stay silent for the 120 s idle timeout: only the grace period ends it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while let Some(chunk) = tokio::time::timeout_at(deadline, r.chunk())
            .await
            .expect("the leg was still open 15 s after SIGTERM")
            .unwrap()
        {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if !signalled && text.contains("\"text\"") {
                Command::new("kill")
                    .arg("-TERM")
                    .arg(server.child.id().to_string())
                    .status()
                    .unwrap();
                signalled = true;
            }
        }
        assert!(signalled, "the leg never streamed its text: {text}");
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<_>>()
    });
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "error", "{lines:?}");
    assert_eq!(last["retryable"], true, "{lines:?}");
    assert_eq!(
        lines.iter().filter(|l| l["event"] == "error").count(),
        1,
        "{lines:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "relay did not exit after its grace period"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

#[test]
fn a_configuration_error_is_printed_as_written_over_several_lines() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "bind = \"127.0.0.1:0\"\nbnid = 3\n");
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .env_remove("RELAY_CONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bnid"), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.trim_start().starts_with("2 | bnid")),
        "the offending line is shown on its own line: {stderr}"
    );
    assert!(!stderr.contains("| 2 |"), "{stderr}");
}

/// The first ```toml block after `marker` in the README.
fn readme_block(marker: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let after = &readme[readme
        .find(marker)
        .unwrap_or_else(|| panic!("README lacks {marker}"))..];
    let start = after.find("```toml\n").unwrap() + "```toml\n".len();
    after[start..][..after[start..].find("```").unwrap()].to_owned()
}

#[test]
fn the_readme_defaults_block_pasted_as_is_starts() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), &readme_block("Every key, with its default"));
    // Only the port is moved off 7711, which another process may hold; the store is the
    // default relative path, created under the working directory.
    let server = Server::start(&config, dir.path(), &[("RELAY_BIND", "127.0.0.1:0")]);
    let status = runtime().block_on(async {
        reqwest::Client::new()
            .get(format!("{}/healthz", server.base))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert_eq!(status, 200);
    assert!(dir.path().join("relay-data/relay.db").exists());
}
