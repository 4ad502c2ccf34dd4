//! The world the client tests run in: a scripted OpenAI-compatible upstream (a test double that
//! replays tool calls and text, records every request, and serves a SearXNG-shaped `/search`), a
//! real `relay serve` on port 0 whose only model is that upstream, project directories, and the
//! real `relay` binary run as a client against it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

use crate::harness::{Serve, write_config};

pub use crate::harness::BIN;

/// One scripted upstream answer.
#[derive(Clone)]
pub enum Reply {
    /// The model asks for these calls: `(id, name, arguments as JSON)`.
    Tools(Vec<(&'static str, &'static str, Value)>),
    /// As `Tools`, with the arguments string sent exactly as given (not necessarily valid JSON).
    RawTools(Vec<(&'static str, &'static str, String)>),
    Text(String),
    /// A first piece of text, then silence until the client goes away.
    Stall,
    /// Reasoning (`reasoning_content`), then the answer text.
    Thinking(&'static str, &'static str),
    /// A first piece of text, then the body ends without a finish reason: a broken upstream.
    Cut,
}

pub fn text(t: &str) -> Reply {
    Reply::Text(t.to_owned())
}

#[derive(Clone, Default)]
struct Shared {
    script: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Value>>>,
    dropped: Arc<Notify>,
    received: Arc<Notify>,
}

pub struct Upstream {
    pub addr: SocketAddr,
    shared: Shared,
}

struct DropSignal(Arc<Notify>);
impl Drop for DropSignal {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

fn sse(v: Value) -> String {
    format!("data: {v}\n\n")
}

/// The stream of one leg that ends asking for `calls`: `(id, name, arguments string)`.
fn tool_chunks<'a>(
    calls: impl Iterator<Item = (&'a str, &'a str, String)>,
    usage: String,
) -> Vec<String> {
    let mut out: Vec<String> = calls
        .enumerate()
        .map(|(i, (id, name, args))| {
            sse(
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": id,
                "type": "function", "function": {"name": name, "arguments": args}}]}}]}),
            )
        })
        .collect();
    out.push(sse(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ));
    out.push(usage);
    out.push("data: [DONE]\n\n".into());
    out
}

fn chunks(reply: &Reply) -> Vec<String> {
    let usage = sse(json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}));
    match reply {
        Reply::Text(t) => vec![
            sse(json!({"choices": [{"index": 0, "delta": {"content": t}}]})),
            sse(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
            usage,
            "data: [DONE]\n\n".into(),
        ],
        Reply::Tools(calls) => tool_chunks(
            calls
                .iter()
                .map(|(id, name, args)| (*id, *name, args.to_string())),
            usage,
        ),
        Reply::RawTools(calls) => tool_chunks(
            calls
                .iter()
                .map(|(id, name, args)| (*id, *name, args.clone())),
            usage,
        ),
        Reply::Stall | Reply::Cut => vec![sse(
            json!({"choices": [{"index": 0, "delta": {"content": "thinking…"}}]}),
        )],
        Reply::Thinking(reasoning, answer) => {
            let mut out = vec![sse(
                json!({"choices": [{"index": 0, "delta": {"reasoning_content": reasoning}}]}),
            )];
            out.extend(chunks(&Reply::Text((*answer).to_owned())));
            out
        }
    }
}

async fn completions(State(s): State<Shared>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    s.requests.lock().unwrap().push(request);
    s.received.notify_one();
    let reply = s
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| text("ok"));
    let head = chunks(&reply);
    let stall = matches!(reply, Reply::Stall);
    let guard = DropSignal(s.dropped.clone());
    let head = futures::stream::iter(
        head.into_iter()
            .map(|c| Ok::<_, std::io::Error>(Bytes::from(c))),
    );
    let tail = futures::stream::unfold((guard, stall), |(g, stall)| async move {
        if stall {
            std::future::pending::<()>().await;
        }
        drop(g);
        None::<(Result<Bytes, std::io::Error>, _)>
    });
    use futures::StreamExt;
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(head.chain(tail)))
        .unwrap()
}

async fn searxng(Query(q): Query<std::collections::HashMap<String, String>>) -> axum::Json<Value> {
    let query = q.get("q").cloned().unwrap_or_default();
    axum::Json(json!({"results": [
        {"title": format!("About {query}"), "url": "https://example.org/answer", "content": "The answer is 42."}
    ]}))
}

impl Upstream {
    pub async fn start(script: Vec<Reply>) -> Self {
        let shared = Shared::default();
        shared.script.lock().unwrap().extend(script);
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/search", get(searxng))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, shared }
    }

    pub fn push(&self, reply: Reply) {
        self.shared.script.lock().unwrap().push_back(reply);
    }

    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The tool messages of request `n`, as `(tool_call_id, content)` in order.
    pub fn tool_results(&self, n: usize) -> Vec<(String, String)> {
        self.requests()[n]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap().to_owned(),
                    m["content"]
                        .as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| m["content"].to_string()),
                )
            })
            .collect()
    }

    /// The names of the tools request `n` offered the model.
    pub fn tool_names(&self, n: usize) -> Vec<String> {
        self.requests()[n]["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub async fn wait_requests(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.requests().len() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "upstream never got request {n}"
            );
            let _ =
                tokio::time::timeout(Duration::from_millis(200), self.shared.received.notified())
                    .await;
        }
    }

    pub async fn wait_dropped(&self) {
        tokio::time::timeout(Duration::from_secs(10), self.shared.dropped.notified())
            .await
            .expect("the upstream stream was not dropped");
    }
}

/// `relay serve` on port 0 (through the shared harness) until dropped.
pub struct Relay {
    pub url: String,
    pub upstream: Upstream,
    pub dir: tempfile::TempDir,
    _server: Serve,
}

impl Relay {
    /// Open mode (no accounts).
    pub async fn open(script: Vec<Reply>) -> Self {
        Self::start(script, "").await
    }

    /// Accounts on, with cheap hashing; `auth_extra` goes into the `[auth]` table.
    pub async fn with_auth(script: Vec<Reply>, auth_extra: &str) -> Self {
        Self::start(
            script,
            &format!(
                "[auth]\nargon2_memory_kib = 256\nargon2_iterations = 1\n{auth_extra}\nurl = "
            ),
        )
        .await
    }

    async fn start(script: Vec<Reply>, auth: &str) -> Self {
        Self::start_with(script, auth, "").await
    }

    /// As `with_auth`, with `models` (more `[[models]]` tables on the provider `fake`) added.
    pub async fn with_auth_and_models(script: Vec<Reply>, models: &str) -> Self {
        Self::start_with(
            script,
            "[auth]\nargon2_memory_kib = 256\nargon2_iterations = 1\nurl = ",
            models,
        )
        .await
    }

    async fn start_with(script: Vec<Reply>, auth: &str, models: &str) -> Self {
        let upstream = Upstream::start(script).await;
        let dir = tempfile::tempdir().unwrap();
        let db = format!("sqlite://{}", dir.path().join("relay.db").display());
        let auth = if auth.is_empty() {
            String::new()
        } else {
            format!("{auth}\"{db}\"\n")
        };
        let config = write_config(
            dir.path(),
            &format!(
                "bind = \"127.0.0.1:0\"\n[memory]\nurl = \"{db}\"\n{auth}\
                 [[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"http://{a}/v1\"\n\
                 [[models]]\nname = \"scripted\"\nprovider = \"fake\"\nupstream = \"scripted\"\n{models}\
                 [routing]\nauto = [\"scripted\"]\n[search]\nkind = \"searxng\"\nbase_url = \"http://{a}\"\n",
                a = upstream.addr
            ),
        );
        // The child's start-up is read on a blocking thread so the upstream keeps being served.
        let server = tokio::task::spawn_blocking(move || Serve::start(&config))
            .await
            .unwrap();
        Self {
            url: server.base.clone(),
            upstream,
            dir,
            _server: server,
        }
    }

    /// Signs up an account and returns its token.
    pub async fn signup(&self, email: &str) -> String {
        let c = relay_client::Client::new(self.url.as_str()).unwrap();
        c.signup(email, "correct-horse-battery")
            .await
            .unwrap()
            .token
    }
}

/// A project directory: a git work tree with an `origin` when `remote` is given, else a plain one.
pub fn project(remote: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if let Some(url) = remote {
        let git = |args: &[&str]| {
            let s = std::process::Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
        };
        git(&["init", "-q"]);
        git(&["remote", "add", "origin", url]);
    }
    dir
}

pub fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// `relay <args>` as a client in `cwd`, with its own config home and `stdin` fed in.
pub struct Run {
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Run {
    pub fn new(relay: &Relay, cwd: &Path) -> Self {
        Self {
            cwd: cwd.to_owned(),
            home: relay.dir.path().join("home"),
            env: vec![("RELAY_URL".into(), relay.url.clone())],
        }
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Gives `c` this client's directory and environment: its own config home, the relay's URL, and
    /// none of the caller's token, tmux or config.
    pub fn configure(&self, c: &mut std::process::Command) {
        c.current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env_remove("RELAY_TOKEN")
            .env_remove("TMUX")
            .env_remove("RELAY_CONFIG");
        for (k, v) in &self.env {
            c.env(k, v);
        }
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = std::process::Command::new(BIN);
        c.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.configure(&mut c);
        let mut c = tokio::process::Command::from(c);
        c.kill_on_drop(true);
        c
    }

    pub async fn run(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = self.command(args).spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).await.unwrap();
        drop(input);
        tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("relay did not finish")
            .unwrap()
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// sha256(s)[..12], the project id of spec §2.1, computed independently of the client.
pub fn project_id(s: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(s.as_bytes()))[..12].to_owned()
}
