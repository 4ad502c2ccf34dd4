//! `TestApp`: a Relay on a random port over a fresh SQLite file, with one helper per endpoint.

use std::net::SocketAddr;

use relay_server::config::{AuthConfig, Config};
use relay_server::{AppState, Relay, Stores};
use reqwest::{Client, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub struct TestApp {
    pub addr: SocketAddr,
    pub client: Client,
    pub state: AppState,
    pub dir: tempfile::TempDir,
    shutdown: Option<oneshot::Sender<()>>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Open mode: no `[auth]` table.
pub fn open_config(dir: &std::path::Path) -> Config {
    let mut c = Config::default();
    c.bind = "127.0.0.1:0".parse().unwrap();
    c.memory.url = format!("sqlite://{}", dir.join("relay.db").display());
    c
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
        let relay = Relay::with_stores(config, stores).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let router = relay.router();
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
        }
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
