//! `TestApp`: a Relay on a random port over a fresh store, with one helper per endpoint.
//!
//! The store is a fresh SQLite file, or with `RELAY_TEST_BACKEND=postgres` a fresh PostgreSQL
//! database, so the same HTTP tests run on both backends (`.ci/run` runs them twice).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use relay_server::config::{AuthConfig, Config, MemoryConfig};
use relay_server::{AppState, Relay, Stores};
use reqwest::{Client, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;

#[path = "../support/pg.rs"]
pub mod pg;

/// The backend the HTTP tests run on, from `RELAY_TEST_BACKEND` (`sqlite`, the default, or `postgres`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestBackend {
    Sqlite,
    Postgres,
}

pub fn backend() -> TestBackend {
    match std::env::var("RELAY_TEST_BACKEND").as_deref() {
        Err(_) | Ok("" | "sqlite") => TestBackend::Sqlite,
        Ok("postgres") => TestBackend::Postgres,
        Ok(other) => panic!("RELAY_TEST_BACKEND={other}: use sqlite or postgres"),
    }
}

pub fn on_postgres() -> bool {
    backend() == TestBackend::Postgres
}

/// The PostgreSQL database made for each temporary directory, so that, as with the SQLite file in
/// it, every config built for one directory names the same store. `TestApp` (or `Scratch`) takes
/// the guard out and drops the database when it goes.
fn databases() -> &'static Mutex<HashMap<PathBuf, pg::TestDb>> {
    static DATABASES: std::sync::OnceLock<Mutex<HashMap<PathBuf, pg::TestDb>>> =
        std::sync::OnceLock::new();
    DATABASES.get_or_init(Default::default)
}

/// The store URL for `dir` on the configured backend.
fn store_url(dir: &Path) -> String {
    match backend() {
        TestBackend::Sqlite => format!("sqlite://{}", dir.join("relay.db").display()),
        TestBackend::Postgres => databases()
            .lock()
            .unwrap()
            .entry(dir.to_owned())
            .or_insert_with(pg::TestDb::create_blocking)
            .url
            .clone(),
    }
}

fn take_database(dir: &Path) -> Option<pg::TestDb> {
    databases().lock().unwrap().remove(dir)
}

/// No provider keys: tests configure their providers explicitly, whatever the machine's environment holds.
pub struct NoEnv;

impl relay_server::config::Env for NoEnv {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

pub struct TestApp {
    pub addr: SocketAddr,
    pub client: Client,
    pub state: AppState,
    pub dir: tempfile::TempDir,
    shutdown: Option<oneshot::Sender<()>>,
    /// On PostgreSQL, the test's database; dropped after the app is told to stop.
    db: Option<pg::TestDb>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Open mode: no `[auth]` table.
/// A recorded fixture's bytes, from `RELAY_FIXTURES` or the crate's `tests/fixtures`.
pub fn fixture(path: &str) -> Vec<u8> {
    let dir = std::env::var_os("RELAY_FIXTURES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
        });
    let path = dir.join(path);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn open_config(dir: &std::path::Path) -> Config {
    Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        memory: MemoryConfig {
            url: store_url(dir),
            ..MemoryConfig::default()
        },
        ..Config::default()
    }
}

/// Accounts on, with cheap Argon2 costs so tests stay fast (production keeps OWASP's).
pub fn auth_config(dir: &std::path::Path) -> Config {
    let mut c = open_config(dir);
    c.auth = Some(AuthConfig {
        url: c.memory.url.clone(),
        argon2_memory_kib: 256,
        argon2_iterations: 1,
        ..AuthConfig::default()
    });
    c
}

impl TestApp {
    pub async fn open() -> Self {
        Self::spawn_with(open_config).await
    }

    pub async fn with_auth() -> Self {
        Self::spawn_with(auth_config).await
    }

    /// Starts with the configuration `make` builds for a fresh temporary directory.
    pub async fn spawn_with(make: impl FnOnce(&std::path::Path) -> Config) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = make(dir.path());
        let stores = Stores::open(&config).await.unwrap();
        Self::spawn(config, stores, dir).await
    }

    pub async fn spawn(config: Config, stores: Stores, dir: tempfile::TempDir) -> Self {
        Self::from_relay(Relay::with_stores(config, stores, &NoEnv).unwrap(), dir).await
    }

    /// Serves an already built app.
    pub async fn from_relay(relay: Relay, dir: tempfile::TempDir) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let router = relay.router();
        let db = take_database(dir.path());
        tokio::spawn(async move {
            relay_server::serve(listener, router, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Self {
            addr,
            client: Client::new(),
            state: relay.state().clone(),
            dir,
            shutdown: Some(tx),
            db,
        }
    }

    /// The PostgreSQL database behind the app, when the tests run on PostgreSQL.
    pub fn pg_url(&self) -> Option<&str> {
        self.db.as_ref().map(|d| d.url.as_str())
    }

    /// A connection pool on the app's PostgreSQL database, to look at rows as another client would.
    pub async fn pg_pool(&self) -> sqlx::PgPool {
        sqlx::PgPool::connect(self.pg_url().expect("not running on PostgreSQL"))
            .await
            .unwrap()
    }

    /// Posts every body to `/v1/agent/stream` at once as `token`; each leg's status and whole
    /// response text, in the order of `bodies`.
    pub async fn concurrent_legs(
        &self,
        token: &str,
        bodies: Vec<Value>,
    ) -> Vec<(StatusCode, String)> {
        let legs = bodies.into_iter().map(|b| {
            let (client, url, token) = (
                self.client.clone(),
                self.url("/v1/agent/stream"),
                token.to_owned(),
            );
            tokio::spawn(async move {
                let r = client
                    .post(url)
                    .bearer_auth(token)
                    .json(&b)
                    .send()
                    .await
                    .unwrap();
                (r.status(), r.text().await.unwrap())
            })
        });
        let mut out = Vec::new();
        for leg in legs.collect::<Vec<_>>() {
            out.push(leg.await.unwrap());
        }
        out
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Response {
        let mut req = self.client.get(self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> Response {
        let mut req = self.client.post(self.url(path)).json(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Response {
        self.client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn signup(&self, email: &str, password: &str) -> Response {
        self.post(
            "/v1/auth/signup",
            None,
            &json!({"email": email, "password": password}),
        )
        .await
    }

    pub async fn signin(&self, email: &str, password: &str) -> Response {
        self.post(
            "/v1/auth/signin",
            None,
            &json!({"email": email, "password": password}),
        )
        .await
    }

    /// Signs up and returns the token.
    pub async fn user(&self, email: &str) -> String {
        let r = self.signup(email, "correct horse battery").await;
        assert_eq!(r.status(), StatusCode::OK);
        body(r).await["token"].as_str().unwrap().to_owned()
    }

    pub async fn me(&self, token: Option<&str>) -> Response {
        self.get("/v1/me", token).await
    }
}

pub async fn body(r: Response) -> Value {
    let text = r.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Asserts status and machine code; returns the body.
pub async fn expect_error(r: Response, status: u16, code: &str) -> Value {
    assert_eq!(r.status().as_u16(), status, "status");
    let b = body(r).await;
    assert_eq!(b["error"], code, "{b}");
    assert!(b["message"].as_str().is_some_and(|m| !m.is_empty()), "{b}");
    b
}
