//! Limits shared through Redis by two instances (two apps on port 0) on one PostgreSQL database:
//! a sign-in failure budget or an agent rate spent across both holds on both, and with the
//! private `redis-server` stopped each instance falls back to its own limits (`/readyz` says
//! `limits: degraded`, still 200) and goes back to Redis by itself when it is restarted.
//!
//! Each test runs its own `redis-server` (the Debian binary; `.ci/run` installs it) on a port
//! it picks, without persistence, and its own PostgreSQL database on the machine's server.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "support/pg.rs"]
mod pg;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use relay_server::config::{AuthConfig, Config, Env};
use relay_server::{Relay, Stores};
use serde_json::{Value, json};

struct NoEnv;

impl Env for NoEnv {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

/// Only `REDIS_PASSWORD`, set.
struct RedisPassword(&'static str);

impl Env for RedisPassword {
    fn var(&self, name: &str) -> Option<String> {
        (name == "REDIS_PASSWORD").then(|| self.0.to_owned())
    }
}

/// A private `redis-server`; killed when dropped.
struct Redis {
    port: u16,
    password: Option<&'static str>,
    child: Option<Child>,
}

impl Redis {
    async fn start() -> Self {
        Self::start_with(None).await
    }

    async fn start_with(password: Option<&'static str>) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut r = Self {
            port,
            password,
            child: None,
        };
        r.restart().await;
        r
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    async fn restart(&mut self) {
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"]);
        if let Some(p) = self.password {
            command.args(["--requirepass", p]);
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (.ci/run installs the Debian package)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let url = match self.password {
                Some(p) => format!("redis://:{p}@127.0.0.1:{}/0", self.port),
                None => self.url(),
            };
            let up = async {
                let client = redis::Client::open(url).ok()?;
                let mut conn = client.get_multiplexed_async_connection().await.ok()?;
                redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .ok()
            };
            if up.await.is_some() {
                return;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGSTOP or SIGCONT: a stopped server accepts connections and answers nothing (slow Redis).
    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One instance on port 0, served until the test ends.
struct Instance {
    base: String,
    http: reqwest::Client,
}

impl Instance {
    async fn start(config: Config) -> Self {
        Self::start_in(config, &NoEnv).await
    }

    async fn start_in(config: Config, env: &dyn Env) -> Self {
        let stores = Stores::open(&config).await.unwrap();
        let relay = Relay::with_stores(config, stores, env).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(relay_server::serve(
            listener,
            relay.router(),
            std::future::pending(),
        ));
        Self {
            base,
            http: reqwest::Client::new(),
        }
    }

    async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    async fn leg(&self) -> reqwest::Response {
        self.post(
            "/v1/agent/stream",
            &json!({"project_id": "p1", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await
    }

    async fn readyz(&self) -> (u16, Value) {
        let r = self.get("/readyz").await;
        (r.status().as_u16(), r.json().await.unwrap())
    }

    async fn limits_store_errors(&self) -> f64 {
        let text = self.get("/metrics").await.text().await.unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("relay_limits_store_errors_total "))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    }
}

fn config(db_url: &str, redis_url: &str, auth: bool) -> Config {
    let mut c = Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        ..Config::default()
    };
    c.memory.url = db_url.to_owned();
    if auth {
        c.auth = Some(AuthConfig {
            url: db_url.to_owned(),
            argon2_memory_kib: 256,
            argon2_iterations: 1,
            ..AuthConfig::default()
        });
    }
    c.limits.url = Some(redis_url.to_owned());
    // Each test has its own Redis; a prefix of its own still proves the setting is used.
    c.limits.prefix = "relay-test".to_owned();
    c
}

fn retry_after(r: &reqwest::Response) -> u64 {
    r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signin_budget_spent_across_two_instances_locks_on_both() {
    let redis = Redis::start().await;
    let db = pg::TestDb::create().await;
    let mut c = config(&db.url, &redis.url(), true);
    c.limits.signin_failures = 4;
    let a = Instance::start(c.clone()).await;
    let b = Instance::start(c).await;

    let good = json!({"email": "ada@example.com", "password": "correct horse"});
    let bad = json!({"email": "ada@example.com", "password": "wrong guess"});
    assert_eq!(a.post("/v1/auth/signup", &good).await.status(), 200);
    // Four failures, two through each instance: each instance alone saw only two.
    for instance in [&a, &b, &a, &b] {
        assert_eq!(instance.post("/v1/auth/signin", &bad).await.status(), 401);
    }
    for instance in [&a, &b] {
        let r = instance.post("/v1/auth/signin", &bad).await;
        assert_eq!(r.status(), 429, "the shared budget is spent");
        let wait = retry_after(&r);
        assert!(
            (850..=901).contains(&wait),
            "the lock lasts the window: {wait}"
        );
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "rate_limited");
    }
    // Locked means locked: the right password is not even checked.
    assert_eq!(b.post("/v1/auth/signin", &good).await.status(), 429);

    // The keys are Redis' own, under the configured prefix.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let n: u64 = redis::cmd("ZCARD")
        .arg("relay-test:signin:email:ada@example.com")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(n, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_rate_spent_across_two_instances_refuses_on_both() {
    let redis = Redis::start().await;
    let db = pg::TestDb::create().await;
    let mut c = config(&db.url, &redis.url(), false);
    c.limits.agent_burst = 3;
    c.limits.agent_per_minute = 1;
    let a = Instance::start(c.clone()).await;
    let b = Instance::start(c).await;

    for instance in [&a, &b, &a] {
        let r = instance.leg().await;
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    for instance in [&b, &a] {
        let r = instance.leg().await;
        assert_eq!(r.status(), 429, "the shared burst of 3 is spent");
        let wait = retry_after(&r);
        assert!((1..=61).contains(&wait), "{wait}");
    }
    assert_eq!(a.limits_store_errors().await, 0.0);
    assert_eq!(a.readyz().await.1["checks"]["limits"]["status"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_going_away_falls_back_per_instance_and_coming_back_is_used_again() {
    let mut redis = Redis::start().await;
    let db = pg::TestDb::create().await;
    let mut c = config(&db.url, &redis.url(), false);
    c.limits.agent_burst = 2;
    c.limits.agent_per_minute = 1;
    let a = Instance::start(c.clone()).await;
    let b = Instance::start(c).await;

    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(status(a.leg().await), 200);
    assert_eq!(status(b.leg().await), 200);
    assert_eq!(
        status(a.leg().await),
        429,
        "shared: the burst of 2 is spent"
    );

    // A Redis that answers nothing: the decision is A's own (its counters are untouched), within
    // the short deadline.
    redis.signal("-STOP");
    let started = Instant::now();
    assert_eq!(status(a.leg().await), 200);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(a.limits_store_errors().await >= 1.0);
    redis.signal("-CONT");

    redis.stop();
    // Per-instance limits now: each instance has its own burst of 2, and answers at once.
    let started = Instant::now();
    assert_eq!(status(b.leg().await), 200);
    assert_eq!(status(b.leg().await), 200);
    assert_eq!(status(b.leg().await), 429);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "no waiting on a dead Redis"
    );
    let (code, ready) = a.readyz().await;
    assert_eq!(code, 200, "a degraded limits store does not fail readiness");
    assert_eq!(ready["status"], "ready");
    assert_eq!(ready["checks"]["limits"]["status"], "degraded", "{ready}");
    assert!(b.limits_store_errors().await >= 1.0);

    redis.restart().await;
    // Back by itself: readiness says ok on both without any restart of the instances.
    let deadline = Instant::now() + Duration::from_secs(15);
    for instance in [&a, &b] {
        loop {
            let (_, ready) = instance.readyz().await;
            if ready["checks"]["limits"]["status"] == "ok" {
                break;
            }
            assert!(Instant::now() < deadline, "never back on Redis: {ready}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // The restarted Redis is empty: a fresh shared burst of 2, spent across both instances. B's
    // own counters are spent, so B admitting a leg proves Redis decides again.
    assert_eq!(status(b.leg().await), 200);
    assert_eq!(status(a.leg().await), 200);
    assert_eq!(status(b.leg().await), 429);
    assert_eq!(status(a.leg().await), 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_comes_from_the_url_or_redis_password() {
    let redis = Redis::start_with(Some("s3cret-pw")).await;
    let db = pg::TestDb::create().await;
    let limits_status =
        |i: Instance| async move { i.readyz().await.1["checks"]["limits"]["status"].clone() };
    let c = config(&db.url, &redis.url(), false);
    assert_eq!(
        limits_status(Instance::start(c.clone()).await).await,
        "degraded",
        "no password"
    );
    let from_env = Instance::start_in(c, &RedisPassword("s3cret-pw")).await;
    assert_eq!(limits_status(from_env).await, "ok");
    let in_url = config(
        &db.url,
        &format!("redis://:s3cret-pw@127.0.0.1:{}/0", redis.port),
        false,
    );
    assert_eq!(limits_status(Instance::start(in_url).await).await, "ok");
}
