//! A private tmux server (its own socket) for the tests that need a real terminal: the pane tools
//! drive its panes, and the interactive session runs in one as it would for a user.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub struct Tmux {
    pub socket: PathBuf,
}

impl Tmux {
    /// A server whose one session runs `command` in a 200x50 pane. Panes stay after their program
    /// exits, so a test can read the last screen and the exit status.
    pub fn start(dir: &Path, command: &str) -> Self {
        Self::start_from(Command::new("tmux"), dir, command)
    }

    /// As `start`, with `tmux` already given the environment and directory the session should have:
    /// a new server takes its global environment from the process that starts it.
    pub fn start_from(mut tmux: Command, dir: &Path, command: &str) -> Self {
        let socket = dir.join("tmux.sock");
        let s = tmux
            .arg("-S")
            .arg(&socket)
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "200",
                "-y",
                "50",
            ])
            .arg(command)
            .args([";", "set-option", "-g", "remain-on-exit", "on"])
            .status()
            .expect("tmux is needed for the terminal tests (.ci/run installs it)");
        assert!(s.success());
        Self { socket }
    }

    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    pub fn env(&self) -> String {
        format!("{},0,0", self.socket.display())
    }

    /// The pane's text, scrollback included.
    pub fn capture(&self, pane: &str) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-S", "-", "-t", pane])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The pane's visible text, no scrollback: what a full-screen program shows now.
    pub fn screen(&self, pane: &str) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", pane])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The pane's text with its attributes as escape sequences (`\x1b[2m` for dim).
    pub fn capture_styled(&self, pane: &str) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-e", "-S", "-", "-t", pane])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the pane's text passes `check`; no fixed sleeps, a poll of the screen.
    pub async fn wait_until(&self, pane: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.capture(pane);
            if check(&screen) {
                return screen;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "pane {pane} never showed {what}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn wait_for(&self, pane: &str, text: &str) -> String {
        self.wait_until(pane, text, |s| s.contains(text)).await
    }

    /// Types into the pane: `keys` are tmux key names (`Enter`, `C-c`) or literal text.
    pub fn send_keys(&self, pane: &str, keys: &[&str]) {
        let s = self
            .tmux()
            .args(["send-keys", "-t", pane])
            .args(keys)
            .status()
            .unwrap();
        assert!(s.success());
    }

    /// The pane's title, which a program sets with `ESC]0;…` or `ESC]2;…`.
    pub fn title(&self, pane: &str) -> String {
        let out = self
            .tmux()
            .args(["display-message", "-p", "-t", pane, "#{pane_title}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The exit status of the pane's program once it has exited, else `None`.
    pub fn exit_status(&self, pane: &str) -> Option<i32> {
        let out = self
            .tmux()
            .args([
                "display-message",
                "-p",
                "-t",
                pane,
                "#{pane_dead}:#{pane_dead_status}",
            ])
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        shown.trim().strip_prefix("1:").and_then(|s| s.parse().ok())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}
