//! run_command: the user's shell (`$SHELL`, else `/bin/sh`) runs the line in the project root with
//! a timeout; the result is `exit_code=N` then stdout and stderr as they interleaved (rule 4),
//! capped with a note when cut.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use super::str_arg;
use crate::client::project::Project;

/// Bytes of output kept; the rest is counted and dropped.
const OUTPUT_CAP: usize = 30 * 1024;
const DEFAULT_TIMEOUT_SECS: u64 = 120;

fn timeout() -> Duration {
    let secs = std::env::var("RELAY_COMMAND_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_TIMEOUT_SECS);
    Duration::from_secs(secs)
}

pub async fn run_command(project: &Project, args: &Value) -> anyhow::Result<String> {
    let line = str_arg(args, "command")?;
    let shell = std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".to_owned());
    // One pipe for both streams keeps their interleaving, as a terminal would show it.
    let (mut reader, writer) = std::io::pipe()?;
    let mut std_cmd = std::process::Command::new(&shell);
    std_cmd
        .arg("-c")
        .arg(line)
        .current_dir(&project.root)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        // Its own process group, so a timeout kills what it started too.
        .process_group(0);
    let mut child = tokio::process::Command::from(std_cmd)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {shell}"))?;

    let collected = Arc::new(Mutex::new((Vec::<u8>::new(), 0usize)));
    let sink = collected.clone();
    let reading = tokio::task::spawn_blocking(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut c) = sink.lock() {
                let room = OUTPUT_CAP.saturating_sub(c.0.len());
                c.0.extend_from_slice(&buf[..n.min(room)]);
                c.1 += n;
            }
        }
    });

    let limit = timeout();
    let (status, timed_out) = match tokio::time::timeout(limit, child.wait()).await {
        Ok(status) => (Some(status?), false),
        Err(_) => {
            // The whole group: what the shell started dies with it. (Through rustix's safe call,
            // never a `kill` program, whose parsing of a negative pid varies between versions.)
            if let Some(pid) = child
                .id()
                .and_then(|p| i32::try_from(p).ok())
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.kill().await;
            (None, true)
        }
    };
    // A background process that kept the pipe open must not hold the result back for long.
    let _ = tokio::time::timeout(Duration::from_secs(2), reading).await;

    let (bytes, total) = collected
        .lock()
        .map(|c| (c.0.clone(), c.1))
        .unwrap_or_default();
    let mut output = String::from_utf8_lossy(&bytes).into_owned();
    if total > bytes.len() {
        output.push_str(&format!(
            "\n[output cut: {total} bytes in all, the first {} shown]",
            bytes.len()
        ));
    }
    let code = match status {
        Some(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        None => 124,
    };
    let mut result = format!("exit_code={code}\n{output}");
    if timed_out {
        result.push_str(&format!(
            "\n[timed out after {} s; the command was killed]",
            limit.as_secs()
        ));
    }
    Ok(result)
}
