//! Starting the harness's own helper processes (the mock upstream, the bare proxy): each prints
//! a line `<prefix>ADDR` on standard output once it listens, and dies with the harness.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::AsyncBufReadExt;

/// Starts `exe args…` and reads its address from its first line, which must start with `prefix`;
/// `what` names the process in errors. The child is killed when dropped.
pub async fn spawn_listening(
    exe: &Path,
    args: &[&str],
    prefix: &str,
    what: &str,
) -> Result<(tokio::process::Child, SocketAddr)> {
    let mut child = tokio::process::Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {what} {}", exe.display()))?;
    let stdout = child
        .stdout
        .take()
        .with_context(|| format!("the stdout of {what} is not piped"))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .with_context(|| format!("{what} did not start within 30 s"))??
        .with_context(|| format!("{what} exited before listening"))?;
    let addr = line
        .strip_prefix(prefix)
        .with_context(|| format!("unexpected first line from {what}: {line}"))?
        .trim()
        .parse()?;
    Ok((child, addr))
}
