//! The binary under abuse: killed with SIGKILL mid-write, and its logs read for secrets.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::{Serve, runtime, sqlite_config};

/// The SQLite configuration with the agent's burst raised, then `extra`.
fn config(dir: &Path, extra: &str) -> std::path::PathBuf {
    sqlite_config(dir, &format!("[limits]\nagent_burst = 1000\n{extra}"))
}

#[test]
fn every_acknowledged_note_survives_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let server = Serve::start(&cfg);
    let base = server.base.clone();
    let rt = runtime();
    let client = reqwest::Client::new();
    let token: String = rt.block_on(async {
        let r = client
            .post(format!("{base}/v1/auth/signup"))
            .json(&json!({"email": "crash@example.com", "password": "long enough pw"}))
            .send()
            .await
            .unwrap();
        r.json::<Value>().await.unwrap()["token"]
            .as_str()
            .unwrap()
            .to_owned()
    });

    // 1,000 remembers, 16 at a time; the server is killed once 500 were acknowledged.
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let server = Arc::new(Mutex::new(Some(server)));
    rt.block_on(async {
        let sem = Arc::new(tokio::sync::Semaphore::new(16));
        let mut tasks = Vec::new();
        for i in 0..1_000 {
            let permit = sem.clone().acquire_owned().await.unwrap();
            let (client, base, token, acked, server) = (
                client.clone(),
                base.clone(),
                token.clone(),
                acknowledged.clone(),
                server.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let _permit = permit;
                let note = format!("crash-note-{i}");
                let r = client
                    .post(format!("{base}/v1/memory/remember"))
                    .bearer_auth(&token)
                    .json(&json!({"note": note, "project_id": "crash"}))
                    .send()
                    .await;
                if let Ok(r) = r
                    && r.status().as_u16() == 200
                {
                    let mut acked = acked.lock().unwrap();
                    acked.push(note);
                    if acked.len() == 500
                        && let Some(s) = server.lock().unwrap().as_mut()
                    {
                        s.kill();
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let acked = acknowledged.lock().unwrap().clone();
    assert!(
        acked.len() >= 500 && acked.len() < 1_000,
        "the kill landed mid-run: {} acknowledged",
        acked.len()
    );
    drop(server.lock().unwrap().take());

    let server = Serve::start(&cfg);
    // Page through list (recall returns only the newest 200).
    let stored: Vec<String> = rt.block_on(async {
        let mut all = Vec::new();
        loop {
            let r = client
                .get(format!(
                    "{}/v1/memory/list?project_id=crash&limit=200&offset={}",
                    server.base,
                    all.len()
                ))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap();
            let page: Value = r.json().await.unwrap();
            let items = page["items"].as_array().unwrap();
            if items.is_empty() {
                break all;
            }
            all.extend(items.iter().map(|n| n["note"].as_str().unwrap().to_owned()));
        }
    });
    let missing: Vec<&String> = acked.iter().filter(|n| !stored.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged notes lost: {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    eprintln!(
        "sigkill: {} acknowledged before the kill, {} stored after restart, 0 lost",
        acked.len(),
        stored.len()
    );
}

/// A fake provider that rejects every call and echoes the key it was sent, as real providers do.
fn echoing_provider() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Detached: it answers however many calls Relay makes and dies with the test process.
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut buf = vec![0u8; 65536];
            let n = stream.read(&mut buf).unwrap_or(0);
            let request = String::from_utf8_lossy(&buf[..n]).to_string();
            let key = request
                .lines()
                .find_map(|l| {
                    l.strip_prefix("authorization: Bearer ")
                        .or_else(|| l.strip_prefix("Authorization: Bearer "))
                })
                .unwrap_or("none")
                .trim()
                .to_owned();
            let body = json!({"error": {"message": format!("Incorrect API key provided: {key}"), "type": "invalid_request_error", "code": "invalid_api_key"}}).to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/v1")
}

#[test]
fn logs_never_contain_a_token_a_password_or_a_provider_key() {
    let dir = tempfile::tempdir().unwrap();
    let provider_url = echoing_provider();
    let key = "sk-test-LEAKCHECK-0123456789abcdef";
    let password = "hunter2-correct-horse";
    let cfg = config(
        dir.path(),
        &format!(
            "[[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"{provider_url}\"\napi_key_env = \"LEAK_TEST_KEY\"\n\
             [[models]]\nname = \"m\"\nprovider = \"p\"\nupstream = \"x\"\n[routing]\nretries = 1\n"
        ),
    );
    let server = Serve::builder(&cfg)
        .env("RELAY_LOG", "debug")
        .env("LEAK_TEST_KEY", key)
        .start();
    let base = server.base.clone();
    let token = runtime().block_on(async {
        let c = reqwest::Client::new();
        let s: Value = c
            .post(format!("{base}/v1/auth/signup"))
            .json(&json!({"email": "leak@example.com", "password": password}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let token = s["token"].as_str().unwrap().to_owned();
        c.post(format!("{base}/v1/auth/signin"))
            .json(&json!({"email": "leak@example.com", "password": "wrong-password-xyz"}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            c.get(format!("{base}/v1/me"))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
            200
        );
        let r = c
            .post(format!("{base}/v1/agent/stream"))
            .bearer_auth(&token)
            .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert_eq!(status, 502, "{body}");
        assert!(
            !body.contains("LEAKCHECK"),
            "the provider's echo of the key reached the client: {body}"
        );
        c.post(format!("{base}/v1/auth/signout"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        token
    });
    let log = server.stop();
    assert!(
        log.contains("provider failed before any output"),
        "the failure was logged:\n{log}"
    );
    for (what, secret) in [
        ("token", token.as_str()),
        ("token body", token.trim_start_matches("rly_")),
        ("password", password),
        ("wrong password", "wrong-password-xyz"),
        ("provider key", key),
        ("provider key tail", "LEAKCHECK"),
    ] {
        assert!(!log.contains(secret), "the log contains the {what}:\n{log}");
    }
    assert!(
        log.contains("shutting down"),
        "graceful shutdown on SIGTERM"
    );
}
