//! The `relay` binary as an operator uses it: `serve` and `users …` on one configuration file.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use support::{BIN, Serve, relay, runtime, sqlite_config};

fn me(server: &Serve, token: &str) -> Value {
    runtime().block_on(async {
        let r = reqwest::Client::new()
            .get(format!("{}/v1/me", server.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        r.json().await.unwrap()
    })
}

fn signin(server: &Serve, email: &str, password: &str) -> String {
    runtime().block_on(async {
        let r = reqwest::Client::new()
            .post(format!("{}/v1/auth/signin", server.base))
            .json(&json!({"email": email, "password": password}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let v: Value = r.json().await.unwrap();
        v["token"].as_str().unwrap().to_owned()
    })
}

/// Runs one SQL statement on the server's database, as another process would.
fn sql(db: &Path, statement: &'static str) {
    runtime().block_on(async {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        sqlx::query(statement).execute(&pool).await.unwrap();
    });
}

#[test]
fn users_commands_are_visible_through_me_on_a_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = sqlite_config(dir.path(), "default_limit = 100\n");
    let server = Serve::start(&config);

    let out = relay(
        &config,
        &["users", "add", "ops@example.com", "--limit", "5"],
        "s3cret-password\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = signin(&server, "ops@example.com", "s3cret-password");
    let m = me(&server, &token);
    assert_eq!(m["limit"], 5);
    assert_eq!(m["role"], "user");

    let out = relay(
        &config,
        &["users", "set", "ops@example.com", "--role", "admin"],
        "",
    );
    assert!(out.status.success());
    let m = me(&server, &token);
    assert_eq!(
        (
            m["role"].as_str(),
            m["limit"].as_i64(),
            m["remaining"].as_i64()
        ),
        (Some("admin"), Some(-1), Some(-1))
    );

    let out = relay(
        &config,
        &[
            "users",
            "set",
            "ops@example.com",
            "--role",
            "user",
            "--limit",
            "42",
        ],
        "",
    );
    assert!(out.status.success());
    assert_eq!(me(&server, &token)["limit"], 42);

    // Use some quota directly in the store, then reset it.
    sql(
        &dir.path().join("relay.db"),
        "UPDATE users SET used = 7 WHERE email = 'ops@example.com'",
    );
    assert_eq!(me(&server, &token)["used"], 7);
    let out = relay(
        &config,
        &["users", "set", "ops@example.com", "--reset-usage"],
        "",
    );
    assert!(out.status.success());
    let m = me(&server, &token);
    assert_eq!(
        (m["used"].as_i64(), m["remaining"].as_i64()),
        (Some(0), Some(42))
    );

    let out = relay(
        &config,
        &["users", "set", "ops@example.com", "--token-budget", "5000"],
        "",
    );
    assert!(out.status.success());
    let m = me(&server, &token);
    assert_eq!(
        (m["token_budget"].as_i64(), m["tokens_remaining"].as_i64()),
        (Some(5000), Some(5000))
    );
    let out = relay(
        &config,
        &["users", "set", "ops@example.com", "--token-budget", "-2"],
        "",
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("token_budget must be -1"));

    // A spend budget and a model allowlist (issue 40), each checked.
    let out = relay(
        &config,
        &[
            "users",
            "set",
            "ops@example.com",
            "--spend-budget",
            "2.5",
            "--models",
            "demo",
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = me(&server, &token);
    assert_eq!(
        (m["spend_budget_usd"].as_f64(), &m["allowed_models"]),
        (Some(2.5), &serde_json::json!(["demo"]))
    );
    for (args, says) in [
        (&["--spend-budget", "-3"][..], "spend_budget_usd must be -1"),
        (
            &["--models", "nope"][..],
            "`nope`, which is not a configured model",
        ),
    ] {
        let mut argv = vec!["users", "set", "ops@example.com"];
        argv.extend_from_slice(args);
        let out = relay(&config, &argv, "");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }

    let out = relay(&config, &["users", "list"], "");
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(
        listed.contains("ops@example.com") && listed.contains("units 0/42 this month (resets "),
        "{listed}"
    );
    assert!(
        listed.contains("spend $0.00/$2.50 this month") && listed.contains("models demo"),
        "{listed}"
    );
    let out = relay(
        &config,
        &["users", "set", "ops@example.com", "--all-models"],
        "",
    );
    assert!(out.status.success());
    assert_eq!(
        me(&server, &token)["allowed_models"],
        serde_json::Value::Null
    );

    let out = relay(&config, &["users", "delete", "ops@example.com"], "");
    assert!(out.status.success());
    assert_eq!(me(&server, &token)["error"], "unauthorized");
    let out = relay(&config, &["users", "list"], "");
    assert!(
        !String::from_utf8(out.stdout)
            .unwrap()
            .contains("ops@example.com")
    );
}

#[test]
fn users_commands_refuse_bad_input_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let config = sqlite_config(dir.path(), "");
    let out = relay(
        &config,
        &["users", "add", "not-an-email"],
        "long enough pw\n",
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("@"));
    let out = relay(&config, &["users", "add", "a@example.com"], "short\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 8"));
    let out = relay(
        &config,
        &["users", "add", "a@example.com", "--role", "root"],
        "long enough pw\n",
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown role"));
    let out = relay(
        &config,
        &["users", "add", "a@example.com"],
        "long enough pw\n",
    );
    assert!(out.status.success());
    let out = relay(
        &config,
        &["users", "add", "a@example.com"],
        "long enough pw\n",
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = relay(
        &config,
        &["users", "set", "ghost@example.com", "--limit", "3"],
        "",
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no account"));
}

#[test]
fn users_commands_need_an_auth_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("open.toml");
    std::fs::write(
        &path,
        format!(
            "[memory]\nurl = \"sqlite://{}/r.db\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let out = relay(&path, &["users", "list"], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("[auth]"));
}

#[test]
fn serve_refuses_an_unknown_key_a_bad_value_and_an_unknown_scheme() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, expected) in [
        ("bnid = \"127.0.0.1:0\"\n", "bnid"),
        ("[auth]\nsignup = \"sometimes\"\n", "sometimes"),
        (
            "[memory]\nurl = \"mysql://db/relay\"\n",
            "unknown store scheme `mysql`",
        ),
        ("[usage]\nretention_days = 0\n", "usage.retention_days"),
        ("[usage]\nledger = \"off\"\n", "boolean"),
        (
            "[auth]\ndefault_token_budget = 1000\n[usage]\nledger = false\n",
            "usage.ledger = false",
        ),
        (
            "[[providers]]\nname = \"d\"\nkind = \"demo\"\n[[models]]\nname = \"m\"\nprovider = \"d\"\nupstream = \"m\"\noutput_price = -1.0\n",
            "output_price must be",
        ),
        (
            "[auth]\ndefault_token_budget = -5\n",
            "auth.default_token_budget",
        ),
        (
            "[auth]\ndefault_spend_budget_usd = -2.5\n",
            "auth.default_spend_budget_usd must be",
        ),
        (
            "[auth]\ndefault_spend_budget_usd = 10.0\n[usage]\nledger = false\n",
            "auth.default_spend_budget_usd",
        ),
    ] {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, toml).unwrap();
        let out = relay(&path, &["serve"], "");
        assert!(!out.status.success(), "{toml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{toml}: {err}");
    }
}

#[test]
fn open_mode_refuses_a_public_bind_without_allow_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("open.toml");
    std::fs::write(
        &path,
        format!(
            "bind = \"0.0.0.0:0\"\n[memory]\nurl = \"sqlite://{}/r.db\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let out = relay(&path, &["serve"], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-open"));
}

#[test]
fn openapi_command_prints_the_document() {
    let out = Command::new(BIN).arg("openapi").output().unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["paths"]["/v1/me"].is_object());
}

#[test]
fn users_signout_ends_every_session_on_a_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = sqlite_config(dir.path(), "default_limit = 100\n");
    let server = Serve::start(&config);
    let out = relay(
        &config,
        &["users", "add", "ada@example.com"],
        "s3cret-password\n",
    );
    assert!(out.status.success(), "{out:?}");
    let first = signin(&server, "ada@example.com", "s3cret-password");
    let second = signin(&server, "ada@example.com", "s3cret-password");
    assert_eq!(me(&server, &first)["email"], "ada@example.com");

    let out = relay(&config, &["users", "signout", "ada@example.com"], "");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("2 tokens revoked"), "{stdout}");
    for token in [&first, &second] {
        assert_eq!(me(&server, token)["error"], "unauthorized");
    }
    let out = relay(&config, &["users", "signout", "nobody@example.com"], "");
    assert!(!out.status.success());
}

/// A sign-in as a browser sends it: the status, `Retry-After` and the message.
fn try_signin(server: &Serve, email: &str, password: &str) -> (u16, u64, String) {
    runtime().block_on(async {
        let r = reqwest::Client::new()
            .post(format!("{}/v1/auth/signin", server.base))
            .json(&json!({"email": email, "password": password}))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let wait = r
            .headers()
            .get("retry-after")
            .map_or(0, |v| v.to_str().unwrap().parse().unwrap());
        let v: Value = r.json().await.unwrap();
        (
            status,
            wait,
            v["message"].as_str().unwrap_or_default().to_owned(),
        )
    })
}

/// Signs in, waiting out an address's short delay (never a lock).
fn signin_after_delay(server: &Serve, email: &str, password: &str) -> (u16, u64, String) {
    for _ in 0..5 {
        let got = try_signin(server, email, password);
        if got.0 != 429 || got.1 > 2 {
            return got;
        }
        std::thread::sleep(std::time::Duration::from_secs(got.1));
    }
    panic!("still delayed");
}

#[test]
fn users_unlock_lifts_a_sign_in_lock_on_a_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = sqlite_config(dir.path(), "[limits]\nsignin_failures = 2\n");
    let server = Serve::start(&config);
    let out = relay(
        &config,
        &["users", "add", "ada@example.com"],
        "correct horse battery\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for _ in 0..2 {
        assert_eq!(
            signin_after_delay(&server, "ada@example.com", "wrong password!").0,
            401
        );
    }
    let (status, wait, message) =
        signin_after_delay(&server, "ada@example.com", "correct horse battery");
    assert_eq!(status, 429, "{message}");
    assert!(
        message.contains(&format!("try again in {wait} seconds")),
        "{message}"
    );

    let out = relay(&config, &["users", "unlock", "ada@example.com"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("unlocked ada@example.com"));
    // The running server honours it at once: no restart.
    let (status, _, message) =
        signin_after_delay(&server, "ada@example.com", "correct horse battery");
    assert_eq!(status, 200, "{message}");

    let out = relay(&config, &["users", "unlock", "nobody@example.com"], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no account"));

    let out = relay(&config, &["users", "list"], "");
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(
        listed.contains("units 0/100 this month (resets ")
            && listed.contains("tokens 0/unlimited this month (resets "),
        "{listed}"
    );
}
