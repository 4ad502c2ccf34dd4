//! The agent loop's edges: cancellation with ctrl-c, HTTP failures, in-band errors.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_cancels_the_running_leg_not_the_session() {
    let relay = Relay::open(vec![Reply::Stall, text("second answer")]).await;
    let p = project(None);
    let mut child = Run::new(&relay, p.path())
        .command(&["agent"])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"first question\n").await.unwrap();
    relay.upstream.wait_requests(1).await;
    let pid = child.id().unwrap().to_string();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    // The leg is streaming (the upstream sent a first piece and stalls): interrupt it.
    let s = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(s.success());
    relay.upstream.wait_dropped().await;
    // The session goes on: the next message gets an answer.
    stdin.write_all(b"second question\n").await.unwrap();
    drop(stdin);
    let mut rest = String::new();
    while let Ok(Some(line)) = tokio::time::timeout(Duration::from_secs(20), out.next_line())
        .await
        .unwrap()
    {
        rest.push_str(&line);
        rest.push('\n');
    }
    let status = child.wait().await.unwrap();
    assert!(status.success());
    assert!(rest.contains("second answer"), "{rest}");
    // The cancelled turn is not part of the conversation any more.
    let second = &relay.upstream.requests()[1];
    let users: Vec<String> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    assert_eq!(users.len(), 1, "{users:?}");
    assert!(users[0].contains("second question"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_token_says_to_run_relay_login_and_quota_says_so() {
    let relay = Relay::with_auth(vec![], "default_limit = 0").await;
    let p = project(None);
    let out = Run::new(&relay, p.path())
        .env("RELAY_TOKEN", "rly_not-a-real-token")
        .run(&["agent", "-p", "hi"], "")
        .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Run `relay login --server"),
        "{}",
        stderr(&out).to_lowercase()
    );
    assert!(stderr(&out).contains("401"));
    assert!(stdout(&out).is_empty());

    let token = relay.signup("broke@example.com").await;
    let out = Run::new(&relay, p.path())
        .env("RELAY_TOKEN", &token)
        .run(&["agent", "-p", "hi"], "")
        .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("quota exceeded (HTTP 403 quota_exceeded)"),
        "{}",
        stderr(&out)
    );
    assert!(
        relay.upstream.requests().is_empty(),
        "no provider call was made"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_larger_than_the_budget_left_is_not_called_a_used_up_budget() {
    let relay = Relay::with_auth(vec![], "default_token_budget = 20").await;
    let p = project(None);
    let token = relay.signup("small@example.com").await;
    let out = Run::new(&relay, p.path())
        .env("RELAY_TOKEN", &token)
        .run(&["agent", "-p", "hi"], "")
        .await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("refused by the account's monthly budget (HTTP 403 budget_exceeded)")
            && err.contains("does not fit the 20 tokens left"),
        "{err}"
    );
    assert!(!err.contains("used up"), "nothing was used: {err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_relay_fails_with_a_message() {
    let p = project(None);
    let out = tokio::process::Command::new(BIN)
        .args(["agent", "-p", "hi", "--server", "http://127.0.0.1:9"])
        .current_dir(p.path())
        .env_remove("RELAY_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the relay"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_event_during_the_leg_fails_the_task_with_the_relays_message() {
    let relay = Relay::open(vec![Reply::Cut]).await;
    let p = project(None);
    let out = Run::new(&relay, p.path())
        .run(&["agent", "-p", "answer briefly"], "")
        .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the relay reported an error during the leg"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}
