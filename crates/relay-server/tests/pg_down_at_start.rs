//! Start-up with PostgreSQL down: Relay starts anyway, says so on `/readyz`, answers the memory
//! endpoints 503 with their emptied shapes, serves open-mode agent legs without notes (auth-mode
//! legs 503 while the auth store is down), and when the server comes up it migrates the database
//! and serves by itself, with no restart.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "support/cluster.rs"]
mod cluster;

use std::time::Duration;

use cluster::{Cluster, NoEnv, assert_unavailable, eventually, json_of};
use relay_server::config::{AuthConfig, Config, MemoryConfig};
use relay_server::{Relay, Stores};
use serde_json::{Value, json};

/// One Relay on port 0 over `config`; the stores are opened as `relay serve` opens them.
struct Running {
    base: String,
    client: reqwest::Client,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Running {
    async fn start(config: Config) -> Self {
        let stores = Stores::open(&config)
            .await
            .expect("start-up must not fail while the store is down");
        let relay = Relay::with_stores(config, stores, &NoEnv).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(relay_server::serve(listener, relay.router(), async {
            let _ = stopped.await;
        }));
        Self {
            base,
            client: reqwest::Client::new(),
            _stop: stop,
        }
    }

    async fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut r = self.client.get(format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        json_of(r.send().await.unwrap()).await
    }

    async fn post(&self, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        let mut r = self.client.post(format!("{}{path}", self.base)).json(&body);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        json_of(r.send().await.unwrap()).await
    }

    /// A leg's status and its NDJSON lines (or its JSON error as the one line).
    async fn leg(&self, token: Option<&str>, project: &str) -> (u16, Vec<Value>) {
        let mut r = self
            .client
            .post(format!("{}/v1/agent/stream", self.base))
            .json(
                &json!({"project_id": project, "messages": [{"role": "user", "content": "hello"}]}),
            );
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        let lines = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (status, lines)
    }
}

fn memory(url: &str) -> MemoryConfig {
    MemoryConfig {
        url: url.to_owned(),
        max_connections: 4,
        // How long a request waits for a connection while the server is down before it is a 503.
        busy_timeout_ms: 300,
        ..MemoryConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relay_starts_with_postgres_down_and_serves_by_itself_when_it_comes_up() {
    // Created but not started: nothing listens on its port yet.
    let cluster = Cluster::create();
    let url = cluster.admin_url();
    let open = Running::start(Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        memory: memory(&url),
        ..Config::default()
    })
    .await;
    let auth = Running::start(Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        memory: memory(&url),
        auth: Some(AuthConfig {
            url: url.clone(),
            busy_timeout_ms: 300,
            argon2_memory_kib: 256,
            argon2_iterations: 1,
            ..AuthConfig::default()
        }),
        ..Config::default()
    })
    .await;

    // Alive, not ready, and the check names the store.
    for app in [&open, &auth] {
        assert_eq!(
            app.get("/healthz", None).await,
            (200, json!({"status": "ok"}))
        );
        let (s, b) = app.get("/readyz", None).await;
        assert_eq!(s, 503, "{b}");
        assert_eq!(b["status"], "unready", "{b}");
        assert_eq!(b["checks"]["memory_store"]["status"], "down", "{b}");
    }
    let (_, b) = auth.get("/readyz", None).await;
    assert_eq!(b["checks"]["auth_store"]["status"], "down", "{b}");

    // The memory endpoints: 503 with their emptied shapes.
    let (s, b) = open
        .post(
            "/v1/memory/remember",
            None,
            json!({"project_id": "p", "note": "n"}),
        )
        .await;
    assert_unavailable(s, b, json!({"ok": false}));
    let (s, b) = open.get("/v1/memory/recall?project_id=p", None).await;
    assert_unavailable(s, b, json!({"notes": []}));
    let (s, b) = open.get("/v1/memory/list", None).await;
    assert_unavailable(s, b, json!({"total": 0, "items": []}));
    let (s, b) = open
        .post("/v1/memory/delete", None, json!({"all": true}))
        .await;
    assert_unavailable(s, b, json!({"ok": false, "deleted": 0}));

    // An open-mode leg goes on without notes (the built-in demo provider answers it).
    let (s, lines) = open.leg(None, "p").await;
    assert_eq!(s, 200, "{lines:?}");
    assert_eq!(lines[0]["event"], "start", "{lines:?}");
    assert_eq!(lines[0]["notes"], 0, "{lines:?}");
    assert_eq!(lines.last().unwrap()["event"], "done", "{lines:?}");
    // An auth-mode leg cannot check its token: 503, as is signing up.
    let (s, lines) = auth.leg(Some("rly_whatever"), "p").await;
    assert_eq!(
        (s, &lines[0]["error"]),
        (503, &json!("store_unavailable")),
        "{lines:?}"
    );
    let creds = json!({"email": "a@example.com", "password": "correct horse"});
    let (s, b) = auth.post("/v1/auth/signup", None, creds.clone()).await;
    assert_eq!((s, &b["error"]), (503, &json!("store_unavailable")), "{b}");

    // The server comes up: both instances migrate it and serve, without a restart.
    {
        let cluster = &cluster;
        tokio::task::block_in_place(|| cluster.start());
    }
    for app in [&open, &auth] {
        eventually(Duration::from_secs(20), "/readyz is 200", async || {
            app.get("/readyz", None).await.0 == 200
        })
        .await;
    }
    let (s, b) = open
        .post(
            "/v1/memory/remember",
            None,
            json!({"project_id": "p", "note": "first"}),
        )
        .await;
    assert_eq!((s, &b["ok"]), (200, &json!(true)), "{b}");
    let (s, b) = open.get("/v1/memory/list?project_id=p", None).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["items"][0]["id"], "mem#local#p#1", "{b}");
    let (s, lines) = open.leg(None, "p").await;
    assert_eq!((s, &lines[0]["notes"]), (200, &json!(1)), "{lines:?}");

    let (s, b) = auth.post("/v1/auth/signup", None, creds).await;
    assert_eq!(s, 200, "{b}");
    let token = b["token"].as_str().unwrap().to_owned();
    let (s, lines) = auth.leg(Some(&token), "p").await;
    assert_eq!(s, 200, "{lines:?}");
    assert_eq!(lines.last().unwrap()["event"], "done", "{lines:?}");
}
