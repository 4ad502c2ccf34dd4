//! Issue 42's first hour through the real binary: `relay serve` prints addresses that answer,
//! `relay users add` asks for the password on a terminal without echoing it, a second ctrl-c
//! ends the drain at once, and a provider's 429 body (OpenAI's `insufficient_quota`) reaches
//! `relay agent` and the server's log, with the request id and without the key.

use std::path::Path;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};
use tokio::task::block_in_place;

use crate::harness::{Serve, relay, sqlite_config, write_config};
use crate::session::PANE;
use crate::support::{BIN, Reply, Run, Upstream, stderr, stdout};
use crate::tmux::Tmux;

/// A store-backed configuration on `bind`, with the scripted upstream's model when given.
fn config(dir: &Path, bind: &str, extra: &str) -> std::path::PathBuf {
    let db = format!("sqlite://{}", dir.join("relay.db").display());
    write_config(
        dir,
        &format!("bind = \"{bind}\"\n{extra}\n[memory]\nurl = \"{db}\"\n"),
    )
}

/// The model `scripted` on the provider at `base_url` (top-level tables, so they go last).
fn provider(base_url: &str, key_env: &str) -> String {
    format!(
        "[[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\n{key_env}\n\
         [[models]]\nname = \"scripted\"\nprovider = \"fake\"\nupstream = \"scripted\"\n\
         [routing]\nauto = [\"scripted\"]\nretries = 0\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_prints_where_the_console_reference_and_health_check_answer() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = sqlite_config(dir.path(), "");
    let server = block_in_place(|| Serve::start(&cfg));
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = loop {
        if let Some(l) = server.stdout().lines().find(|l| l.contains("console ")) {
            break l.to_owned();
        }
        assert!(Instant::now() < deadline, "no addresses on stdout");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let urls: Vec<&str> = line
        .split_whitespace()
        .filter(|w| w.starts_with("http://"))
        .collect();
    // The address it listens on, the port it was given (not the configured 0).
    let base = &server.base;
    assert_eq!(
        urls,
        [
            format!("{base}/console"),
            format!("{base}/docs"),
            format!("{base}/healthz")
        ],
        "{line}"
    );
    let client = reqwest::Client::new();
    for (url, shows) in urls.iter().zip(["<html", "<html", "ok"]) {
        let r = client.get(*url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{url}");
        let text = r.text().await.unwrap().to_lowercase();
        assert!(text.contains(shows), "{url}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn users_add_asks_twice_on_a_terminal_without_echo_and_reads_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = sqlite_config(dir.path(), "");
    let password = "Typed-Secret-4471";
    let term = Tmux::start(
        dir.path(),
        // The shell says the exit status: tmux 3.3 may mark the pane dead on the terminal's
        // end before it has the status, and then never shows it.
        &format!(
            "sh -c '{BIN} --config {} users add ada@example.com; echo \"users add exited $?\"'",
            cfg.display()
        ),
    );
    term.wait_for(PANE, "password for ada@example.com:").await;
    term.send_keys(PANE, &["-l", password]);
    term.send_keys(PANE, &["Enter"]);
    term.wait_for(PANE, "the same password again:").await;
    term.send_keys(PANE, &["-l", password]);
    term.send_keys(PANE, &["Enter"]);
    let screen = term.wait_for(PANE, "added ada@example.com").await;
    assert!(
        !screen.contains(password) && !screen.contains("Typed-"),
        "the password was echoed:\n{screen}"
    );
    let screen = term.wait_for(PANE, "users add exited").await;
    assert!(screen.contains("users add exited 0"), "{screen}");

    // Piped: the first line is the password, and nothing is asked.
    let out = block_in_place(|| {
        relay(
            &cfg,
            &["users", "add", "bob@example.com"],
            "piped-secret-0815\n",
        )
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("password for"));

    // Each password is the one the account got.
    let server = block_in_place(|| Serve::start(&cfg));
    let client = reqwest::Client::new();
    for (email, pw, status) in [
        ("ada@example.com", password, 200),
        ("bob@example.com", "piped-secret-0815", 200),
        ("ada@example.com", "piped-secret-0815", 401),
    ] {
        let r = client
            .post(format!("{}/v1/auth/signin", server.base))
            .json(&json!({"email": email, "password": pw}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{email}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_ctrl_c_ends_the_ten_second_drain_at_once() {
    let upstream = Upstream::start(vec![Reply::Stall]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "127.0.0.1:0",
        &format!(
            "shutdown_grace_ms = 10000\n{}",
            provider(&format!("http://{}/v1", upstream.addr), "")
        ),
    );
    let mut server = block_in_place(|| Serve::start(&cfg));
    // A leg held open: its first words came, then the model goes quiet.
    let mut leg = reqwest::Client::new()
        .post(format!("{}/v1/agent/stream", server.base))
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(leg.status(), StatusCode::OK);
    let mut seen = String::new();
    while !seen.contains("\"text\"") {
        let chunk = leg.chunk().await.unwrap().expect("the leg ended early");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }

    let first = Instant::now();
    server.sigint();
    block_in_place(|| {
        server.wait_log(Duration::from_secs(5), |l| {
            l.contains("ctrl-c again to stop at once")
        })
    });
    assert!(!server.exited(), "the drain waits for the open leg");
    let second = Instant::now();
    server.sigint();
    let status = block_in_place(|| server.wait_exit(Duration::from_secs(9)));
    let (since_first, since_second) = (first.elapsed(), second.elapsed());
    assert!(status.success(), "{status:?}");
    // The drain alone would have lasted 10 s after the first ctrl-c.
    assert!(
        since_first < Duration::from_secs(5),
        "exited {since_first:?} after the first ctrl-c ({since_second:?} after the second)"
    );
    assert!(
        server
            .log()
            .contains("second ctrl-c: not waiting for the drain")
    );
    // The open leg was ended with its one terminal line, one a client retries elsewhere.
    while let Ok(Some(chunk)) = leg.chunk().await {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let last: Value = serde_json::from_str(seen.lines().last().unwrap()).unwrap();
    assert_eq!(
        (&last["event"], &last["retryable"]),
        (&json!("error"), &json!(true)),
        "{seen}"
    );
}

/// A provider that answers every call as OpenAI does for an account whose credit is spent.
async fn spent_provider() -> String {
    let app = axum::Router::new().fallback(|| async {
        (
            StatusCode::TOO_MANY_REQUESTS,
            [("content-type", "application/json")],
            json!({"error": {
                "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
                "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}})
            .to_string(),
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spent_openai_account_is_named_to_the_user_and_in_the_log() {
    const WORDS: &str =
        "You exceeded your current quota, please check your plan and billing details";
    let key = "sk-proj-FIRSTHOURkey0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "127.0.0.1:0",
        &provider(&spent_provider().await, "api_key_env = \"FIRST_HOUR_KEY\""),
    );
    let server = block_in_place(|| Serve::builder(&cfg).env("FIRST_HOUR_KEY", key).start());

    // Over HTTP with a request id the log must carry.
    let r = reqwest::Client::new()
        .post(format!("{}/v1/agent/stream", server.base))
        .header("x-request-id", "first-hour-429")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let b: Value = r.json().await.unwrap();
    assert!(b["message"].as_str().unwrap().contains(WORDS), "{b}");

    // `relay agent -p` prints them.
    let home = dir.path().join("home");
    let run = Run {
        cwd: dir.path().to_owned(),
        home,
        env: vec![("RELAY_URL".into(), server.base.clone())],
    };
    let out = run.run(&["agent", "-p", "hi"], "").await;
    let shown = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!out.status.success(), "{shown}");
    assert!(
        shown.contains(WORDS) && shown.contains("insufficient_quota"),
        "{shown}"
    );

    let log = block_in_place(|| {
        server.wait_log(Duration::from_secs(5), |l| {
            l.lines()
                .any(|l| l.contains("first-hour-429") && l.contains(WORDS) && l.contains("WARN"))
        })
    });
    assert!(!log.contains("FIRSTHOUR") && !log.contains(key), "{log}");
}
