//! Issue 12 (items 2 and 10) against the real binary: memory under a signup flood, bounded
//! graceful shutdown, configuration errors as written, and the README's defaults block.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Serve, relay_command, runtime, write_config as write};

/// A field of `/proc/PID/status` in kB (`VmHWM` is the peak resident set).
fn status_kb(server: &Serve, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
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
    let server = Serve::builder(&config).current_dir(dir.path()).start();
    let before = status_kb(&server, "VmRSS");
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
    let peak_kb = status_kb(&server, "VmHWM");
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
    assert_eq!(server.healthz(), 200);
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
    let mut server = Serve::builder(&config).current_dir(dir.path()).start();
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
                server.sigterm();
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
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status}");
}

#[test]
fn a_configuration_error_is_printed_as_written_over_several_lines() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "bind = \"127.0.0.1:0\"\nbnid = 3\n");
    let out = relay_command()
        .arg("--config")
        .arg(&config)
        .arg("serve")
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
    // The fence may carry more words after the language (```` ```toml example ````).
    let fence = after.find("```toml").unwrap();
    let start = fence + after[fence..].find('\n').unwrap() + 1;
    after[start..][..after[start..].find("```").unwrap()].to_owned()
}

#[test]
fn the_readme_defaults_block_pasted_as_is_starts() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), &readme_block("Every key, with its default"));
    // Only the port is moved off 7711, which another process may hold; the store is the
    // default relative path, created under the working directory.
    let server = Serve::builder(&config)
        .current_dir(dir.path())
        .env("RELAY_BIND", "127.0.0.1:0")
        .start();
    assert_eq!(server.healthz(), 200);
    assert!(dir.path().join("relay-data/relay.db").exists());
}
