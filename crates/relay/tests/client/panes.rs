//! The pane tools on a real tmux server (a private socket), and their error outside tmux.

use relay_wire::tools::{ToolRole, allowed_names};
use serde_json::json;

use crate::support::*;
use crate::tmux::Tmux;

/// Pane 0 shows a known line and stays open.
const PANE_ZERO: &str = "printf 'pane-zero-content\\n'; sleep 300";

#[tokio::test(flavor = "multi_thread")]
async fn pane_tools_drive_tmux() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![
            ("t1", "read_pane", json!({"pane": 0})),
            (
                "t2",
                "open_pane",
                json!({"layout": "right", "command": "cat"}),
            ),
            (
                "t3",
                "send_keys",
                json!({"pane": 1, "text": "typed-into-cat\n"}),
            ),
            ("t4", "list_panes", json!({})),
            ("t5", "open_pane", json!({"layout": "sideways"})),
        ]),
        text("panes done"),
    ])
    .await;
    let p = project(None);
    let tmux = Tmux::start(relay.dir.path(), PANE_ZERO);
    tmux.wait_for("%0", "pane-zero-content").await;
    let out = Run::new(&relay, p.path())
        .env("TMUX", &tmux.env())
        .run(
            &["agent", "--yes", "--role", "orchestrator", "-p", "panes"],
            "",
        )
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let r = relay.upstream.tool_results(1);
    assert!(r[0].1.contains("pane-zero-content"), "{}", r[0].1);
    assert_eq!(r[1].1, "opened pane 1");
    assert_eq!(r[2].1, "typed into pane 1");
    assert!(
        r[3].1.contains("pane 0: window 0") && r[3].1.contains("pane 1: window 0"),
        "{}",
        r[3].1
    );
    assert_eq!(r[4].1, "opened pane 2", "an unknown layout opens a tab");
    assert!(r[3].1.lines().count() == 2);
    tmux.wait_for("%1", "typed-into-cat").await;
    let windows = std::process::Command::new("tmux")
        .arg("-S")
        .arg(&tmux.socket)
        .args(["list-windows", "-F", "#{window_index}"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&windows.stdout).lines().count(),
        2,
        "the tab is a new window"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn spawn_agent_starts_a_worker_relay_agent_in_a_pane() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![(
            "s1",
            "spawn_agent",
            json!({"layout": "down", "task": "count the files"}),
        )]),
        text("spawned"),
    ])
    .await;
    let p = project(None);
    let tmux = Tmux::start(relay.dir.path(), PANE_ZERO);
    let out = Run::new(&relay, p.path())
        .env("TMUX", &tmux.env())
        .run(
            &[
                "agent",
                "--yes",
                "--role",
                "agent_orchestrator",
                "-p",
                "delegate",
            ],
            "",
        )
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let r = relay.upstream.tool_results(1);
    assert_eq!(r[0].1, "started a worker agent in pane 1");
    // The worker's first leg reaches the relay with the worker's tool set and the task.
    relay.upstream.wait_requests(3).await;
    assert_eq!(
        relay.upstream.tool_names(2),
        allowed_names(Some(ToolRole::Worker))
    );
    let worker = relay.upstream.requests()[2]["messages"].to_string();
    assert!(worker.contains("count the files"), "{worker}");
    tmux.wait_for("%1", "ok").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn outside_tmux_pane_tools_return_a_clear_error() {
    let relay = Relay::open(vec![
        Reply::Tools(vec![
            ("n1", "list_panes", json!({})),
            ("n2", "open_pane", json!({"layout": "tab"})),
        ]),
        text("no tmux"),
    ])
    .await;
    let p = project(None);
    let out = Run::new(&relay, p.path())
        .run(
            &["agent", "--yes", "--role", "orchestrator", "-p", "panes"],
            "",
        )
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    for (_, r) in relay.upstream.tool_results(1) {
        assert!(r.starts_with("error:") && r.contains("needs tmux"), "{r}");
    }
}
