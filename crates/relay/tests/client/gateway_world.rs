//! The world of the real Claude Code's `/login` run (claude_login.rs): `relay serve` in auth mode on
//! loopback whose Claude models are a fake Anthropic provider, an admin and a developer account,
//! a private HOME that names Relay as the sign-in gateway in `~/.claude/settings.json`, a
//! `$BROWSER` that records the URL it is given, the agent in tmux, Chromium approving on
//! `/device` (tests/browser/approve-device.mjs), and a record of what the agent showed at each
//! step, written to `$CARGO_TARGET_TMPDIR/claude-login/record.md` for people to read.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fake_anthropic::FakeAnthropic;
use crate::harness::{Serve, relay as relay_cli, write_config};
use crate::tmux::Tmux;

pub const PANE: &str = "%0";
pub const DEV: &str = "dev@example.com";
pub const PASSWORD: &str = "correct horse battery";
const ADMIN: &str = "admin@example.com";
/// The model names Claude Code 2.1.332 asks for on its own: its default and its quota probe's.
const CLAUDE_MODELS: [&str; 2] = ["claude-opus-4-7", "claude-haiku-4-5-20251001"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What the run needs: Claude Code, node with playwright-core, Chromium. `None` (SKIPPED) when one
/// is missing and nothing requires them; with `RELAY_AGENTS_BIN` set or `CI=true` a missing one
/// fails.
pub fn tools() -> Option<PathBuf> {
    let set = std::env::var_os("RELAY_AGENTS_BIN");
    let required = set.is_some() || std::env::var("CI").is_ok_and(|v| v == "true");
    let bin = set
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("tests/agents/node_modules/.bin"))
        .join("claude");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let missing: Vec<String> = [
        (bin.clone(), "cd tests/agents && npm ci"),
        (
            repo().join("tests/browser/node_modules/playwright-core"),
            "cd tests/browser && npm ci",
        ),
        (PathBuf::from(&chromium), "apt-get install -y chromium"),
    ]
    .into_iter()
    .filter(|(p, _)| !p.exists())
    .map(|(p, fix)| format!("{} ({fix})", p.display()))
    .collect();
    if missing.is_empty() {
        return Some(bin);
    }
    assert!(!required, "RELAY_AGENTS_BIN or CI=true require {missing:?}");
    eprintln!("SKIPPED: missing {missing:?}");
    None
}

/// Relay, its accounts and the developer's machine.
pub struct Gateway {
    pub server: Serve,
    pub fake: FakeAnthropic,
    pub admin: String,
    pub http: reqwest::Client,
    pub claude: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
    browser_log: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Gateway {
    pub async fn start(claude: PathBuf) -> Self {
        let fake = FakeAnthropic::start().await;
        let dir = tempfile::tempdir().unwrap();
        let db = format!("sqlite://{}", dir.path().join("relay.db").display());
        let models: String = ["scripted", CLAUDE_MODELS[0], CLAUDE_MODELS[1]]
            .iter()
            .map(|m| {
                format!("[[models]]\nname = \"{m}\"\nprovider = \"fake\"\nupstream = \"{m}\"\n")
            })
            .collect();
        let config = write_config(
            dir.path(),
            &format!(
                "bind = \"127.0.0.1:0\"\n[memory]\nurl = \"{db}\"\n[auth]\nurl = \"{db}\"\n\
                 signup = \"closed\"\ndefault_limit = -1\nargon2_memory_kib = 256\nargon2_iterations = 1\n\
                 [[providers]]\nname = \"fake\"\nkind = \"anthropic\"\nbase_url = \"{}\"\n{models}\
                 [routing]\nauto = [\"scripted\"]\n",
                fake.url
            ),
        );
        for (email, role) in [(ADMIN, "admin"), (DEV, "user")] {
            let out = relay_cli(
                &config,
                &["users", "add", email, "--role", role],
                &format!("{PASSWORD}\n"),
            );
            assert!(out.status.success(), "{out:?}");
        }
        let conf = config;
        let server = tokio::task::spawn_blocking(move || Serve::start(&conf))
            .await
            .unwrap();
        let http = reqwest::Client::new();
        let admin: Value = http
            .post(format!("{}/v1/auth/signin", server.base))
            .json(&json!({"email": ADMIN, "password": PASSWORD}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let admin = admin["token"].as_str().unwrap().to_owned();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        // Relay is the sign-in gateway, named in the user's own settings (2.1.332 reads no
        // CLAUDE_CODE_MANAGED_SETTINGS_PATH); onboarding and the folder's trust are done already.
        let settings = json!({"forceLoginMethod": "gateway", "forceLoginGatewayUrl": server.base});
        std::fs::write(home.join(".claude/settings.json"), settings.to_string()).unwrap();
        onboarded(&home, &work);
        let browser_log = dir.path().join("browser.log");
        let browser = dir.path().join("browser.sh");
        std::fs::write(
            &browser,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '{}'\n",
                browser_log.display()
            ),
        )
        .unwrap();
        let chmod = Command::new("chmod").arg("+x").arg(&browser).status();
        assert!(chmod.unwrap().success());
        Self {
            server,
            fake,
            admin,
            http,
            claude,
            home,
            work,
            browser_log,
            dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.base)
    }

    /// The agent's environment: its private HOME and `$BROWSER`, and nothing of the caller's (no
    /// `ANTHROPIC_*` variable: the stored sign-in is all it has).
    pub fn agent_env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .current_dir(&self.work)
            .env("HOME", &self.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .env("TERM", "xterm-256color")
            .env("BROWSER", self.dir.path().join("browser.sh"))
            .env("DISABLE_AUTOUPDATER", "1");
    }

    /// Interactive `claude` in a fresh tmux server of its own.
    pub fn interactive(&self, name: &str) -> Tmux {
        let socket_dir = self.dir.path().join(name);
        std::fs::create_dir_all(&socket_dir).unwrap();
        let mut tmux = Command::new("tmux");
        self.agent_env(&mut tmux);
        Tmux::start_from(tmux, &socket_dir, &format!("'{}'", self.claude.display()))
    }

    /// `claude -p PROMPT --allowedTools Bash`: its exit status, stdout and stderr, and how long it
    /// took.
    pub async fn print(&self, prompt: &str) -> (bool, String, Duration) {
        let mut cmd = Command::new(&self.claude);
        self.agent_env(&mut cmd);
        cmd.args(["-p", prompt, "--allowedTools", "Bash"]);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true).stdin(std::process::Stdio::null());
        let started = Instant::now();
        let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
            .await
            .expect("claude -p did not finish in 120 s")
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text, started.elapsed())
    }

    /// The sign-in Claude Code stored (`~/.claude/.credentials.json`'s `enterpriseGateway`).
    pub fn stored(&self) -> Value {
        let path = self.home.join(".claude/.credentials.json");
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .map(|v| v["enterpriseGateway"].clone())
            .unwrap_or(Value::Null)
    }

    /// Moves the stored access token's expiry to `left` from now, as time passing would.
    pub fn expire_in(&self, left: Duration) {
        let path = self.home.join(".claude/.credentials.json");
        let mut stored: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        stored["enterpriseGateway"]["expiresAt"] = json!((now + left).as_millis() as u64);
        std::fs::write(path, stored.to_string()).unwrap();
    }

    /// The URLs Claude Code handed to `$BROWSER` so far.
    pub fn opened(&self) -> Vec<String> {
        std::fs::read_to_string(&self.browser_log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub async fn admin_send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> u16 {
        let mut r = self
            .http
            .request(method, self.url(path))
            .bearer_auth(&self.admin);
        if let Some(b) = body {
            r = r.json(&b);
        }
        r.send().await.unwrap().status().as_u16()
    }

    /// Chromium approves the code at `url` as the developer; what the page showed.
    pub async fn approve_in_chromium(&self, url: &str, shots: &Path) -> Value {
        let mut cmd = tokio::process::Command::new("node");
        cmd.arg(repo().join("tests/browser/approve-device.mjs"))
            .arg(url)
            .arg(DEV)
            .env("SCREENSHOTS", shots)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .expect("node runs tests/browser/approve-device.mjs");
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{PASSWORD}\n").as_bytes())
            .await
            .unwrap();
        drop(stdin);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("Chromium did not approve within 60 s")
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "approve-device.mjs failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.trim()).unwrap()
    }
}

/// Marks Claude Code's first-run screens (theme, the folder's trust) as done in `~/.claude.json`,
/// keeping what else it holds: the runs start at the prompt, where `/login` is typed.
pub fn onboarded(home: &Path, work: &Path) {
    let path = home.join(".claude.json");
    let mut state: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_else(|| json!({}));
    state["hasCompletedOnboarding"] = json!(true);
    state["theme"] = json!("dark");
    let project = work.display().to_string();
    if !state["projects"].is_object() {
        state["projects"] = json!({});
    }
    if !state["projects"][&project].is_object() {
        state["projects"][&project] = json!({});
    }
    state["projects"][&project]["hasTrustDialogAccepted"] = json!(true);
    std::fs::write(path, state.to_string()).unwrap();
}

/// What the agent showed at each step, with the time since the run began; written out when the
/// run ends, passed or failed.
pub struct Record {
    started: Instant,
    text: String,
    pub dir: PathBuf,
}

impl Record {
    pub fn new() -> Self {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("claude-login");
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            started: Instant::now(),
            text: "# The real Claude Code signs in to Relay\n".into(),
            dir,
        }
    }

    pub fn note(&mut self, what: &str) {
        let t = self.started.elapsed().as_secs_f64();
        self.text += &format!("\n## +{t:.1} s: {what}\n");
    }

    pub fn screen(&mut self, what: &str, screen: &str) {
        self.note(what);
        let trimmed: Vec<&str> = screen.lines().map(str::trim_end).collect();
        let body = trimmed.join("\n");
        self.text += &format!("```\n{}\n```\n", body.trim_matches('\n'));
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("record.md"), &self.text);
    }
}

/// Polls the visible screen until `check` holds (no fixed sleeps); the screen it held on.
pub async fn until(term: &Tmux, what: &str, secs: u64, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let screen = term.screen(PANE);
        if check(&screen) {
            return screen;
        }
        assert!(
            Instant::now() < deadline,
            "Claude Code never showed {what} within {secs} s:\n{screen}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The option the cursor (`❯`) is on in a choice the screen shows.
pub fn selected(screen: &str) -> String {
    screen
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix('❯'))
        .map(|l| l.trim().to_owned())
        .next_back()
        .unwrap_or_default()
}
