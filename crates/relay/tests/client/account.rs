//! `relay login`, `relay whoami`, `relay logout` and the credentials file.

use std::os::unix::fs::PermissionsExt;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn login_stores_a_private_token_per_server_whoami_uses_it_logout_revokes_it() {
    let relay = Relay::with_auth(vec![], "").await;
    relay.signup("dev@example.com").await;
    let p = project(None);
    let run = Run::new(&relay, p.path());

    let out = run
        .run(&["login", "--email", "dev@example.com"], "wrong-password\n")
        .await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("wrong email or password"));

    let out = run
        .run(
            &["login", "--email", "dev@example.com"],
            "correct-horse-battery\n",
        )
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let file = run.home.join("config/relay/credentials.toml");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let stored: toml::Value = toml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let token = stored["servers"][relay.url.as_str()]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(token.starts_with("rly_"));

    let out = run.run(&["whoami"], "").await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("dev@example.com (user)"),
        "{}",
        stdout(&out)
    );
    // Units and tokens, each with its period and reset (issue 42).
    let shown = stdout(&out);
    let units = shown
        .lines()
        .find(|l| l.starts_with("  units "))
        .unwrap_or("");
    assert!(
        units.contains("this month") && units.contains("resets ") && units.contains(" left"),
        "{shown}"
    );
    let tokens = shown
        .lines()
        .find(|l| l.starts_with("  tokens "))
        .unwrap_or("");
    assert!(tokens.contains("this month"), "{shown}");
    // Spend too (issue 40): unlimited by default.
    let spend = shown
        .lines()
        .find(|l| l.starts_with("  spend "))
        .unwrap_or("");
    assert!(spend.contains("$0.00 this month, unlimited"), "{shown}");

    let out = run.run(&["agent", "-p", "hello"], "").await;
    assert!(
        out.status.success(),
        "the stored token is used by agent: {}",
        stderr(&out)
    );

    let out = run.run(&["logout"], "").await;
    assert!(out.status.success());
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(!after.contains(&token));
    let me = relay_client::Client::new(relay.url.as_str())
        .unwrap()
        .with_token(Some(token))
        .me()
        .await;
    assert_eq!(
        me.unwrap_err().status(),
        Some(401),
        "signout revoked the token"
    );
    let out = run.run(&["whoami"], "").await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("relay login"));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_xdg_config_home_credentials_go_to_dot_config() {
    let relay = Relay::with_auth(vec![], "").await;
    relay.signup("home@example.com").await;
    let p = project(None);
    let run = Run::new(&relay, p.path());
    let mut cmd = run.command(&["login", "--email", "home@example.com"]);
    cmd.env_remove("XDG_CONFIG_HOME");
    let mut child = cmd.spawn().unwrap();
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"correct-horse-battery\n").await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(run.home.join(".config/relay/credentials.toml").is_file());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_refused_for_quota_after_its_tool_ran_says_what_ran() {
    let relay = Relay::with_auth(
        vec![Reply::Tools(vec![(
            "c1",
            "read_file",
            serde_json::json!({"path": "notes.txt"}),
        )])],
        "default_limit = 1",
    )
    .await;
    relay.signup("q@example.com").await;
    let p = project(None);
    std::fs::write(p.path().join("notes.txt"), "hello").unwrap();
    let run = Run::new(&relay, p.path());
    let out = run
        .run(
            &["login", "--email", "q@example.com"],
            "correct-horse-battery\n",
        )
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    // The first leg takes the only unit and asks for a tool; the next leg is refused.
    let out = run.run(&["agent", "-p", "read my notes"], "").await;
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("quota_exceeded")
            && said.contains("resets at")
            && said.contains("the task stopped part-way")
            && said.contains("read_file")
            && said.contains("notes.txt"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn whoami_says_what_an_unlimited_accounts_units_count() {
    let relay = Relay::with_auth(vec![], "default_limit = -1").await;
    let token = relay.signup("free@example.com").await;
    let p = project(None);
    let out = Run::new(&relay, p.path())
        .env("RELAY_TOKEN", &token)
        .run(&["whoami"], "")
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(
        shown
            .lines()
            .any(|l| l == "  units   0 used this month, unlimited"),
        "{shown}"
    );
}
