//! PostgreSQL stopped and restarted under load: the memory endpoints answer 503 with their emptied
//! shapes while it is down, `/readyz` says so, and the same Relay process serves again by itself
//! when it is back, having lost nothing it acknowledged.
//!
//! The machine's shared server is never touched: the test runs its own private cluster (initdb +
//! pg_ctl, as the `postgres` OS user when it runs as root, since initdb refuses root).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/pg.rs"]
mod pg;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::{Cluster, NoEnv, assert_unavailable, eventually, json_of};

use relay_server::config::{Config, MemoryConfig};
use relay_server::{Relay, Stores};
use serde_json::{Value, json};

/// What the background load saw: every status, and the notes acknowledged with 200.
#[derive(Default)]
struct Seen {
    statuses: BTreeMap<u16, usize>,
    acknowledged: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_stopped_and_restarted_under_load_gives_503_then_recovers_by_itself() {
    let cluster = Cluster::create();
    cluster.start();
    let db = pg::TestDb::create_on(&cluster.admin_url()).await;

    let config = Config {
        bind: "127.0.0.1:0".parse().unwrap(),
        memory: MemoryConfig {
            url: db.url.clone(),
            max_connections: 4,
            // How long a request waits for a connection while the server is down before it is a 503.
            busy_timeout_ms: 300,
            ..MemoryConfig::default()
        },
        ..Config::default()
    };
    let stores = Stores::open(&config).await.unwrap();
    let relay = Relay::with_stores(config, stores, &NoEnv).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(relay_server::serve(listener, relay.router(), async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();

    // Background load: remember and recall in a loop, recording every answer.
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (client, base, seen, stop) = (client.clone(), base.clone(), seen.clone(), stop.clone());
        tokio::spawn(async move {
            for i in 0..100_000 {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let text = format!("load note {i}");
                let r = client
                    .post(format!("{base}/v1/memory/remember"))
                    .json(&json!({"project_id": "p", "note": text}))
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                let _ = r.bytes().await;
                let r = client
                    .get(format!("{base}/v1/memory/recall?project_id=p"))
                    .send()
                    .await
                    .unwrap();
                let recall_status = r.status().as_u16();
                let _ = r.bytes().await;
                let mut s = seen.lock().unwrap();
                if status == 200 {
                    s.acknowledged.push(text);
                }
                *s.statuses.entry(status).or_default() += 1;
                *s.statuses.entry(recall_status).or_default() += 1;
            }
        })
    };
    let acked = || seen.lock().unwrap().acknowledged.len();
    let unavailable = || {
        seen.lock()
            .unwrap()
            .statuses
            .get(&503)
            .copied()
            .unwrap_or(0)
    };
    eventually(
        Duration::from_secs(20),
        "the load writes before the outage",
        async || acked() >= 20,
    )
    .await;

    // Stop the server under load.
    {
        let cluster = &cluster;
        tokio::task::block_in_place(|| cluster.stop());
    }
    let stopped_at = Instant::now();
    let acked_before_stop = acked();

    let post = |path: &str, body: Value| client.post(format!("{base}{path}")).json(&body).send();
    let get = |path: &str| client.get(format!("{base}{path}")).send();
    let (s, b) = json_of(
        post(
            "/v1/memory/remember",
            json!({"project_id": "p", "note": "during"}),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_unavailable(s, b, json!({"ok": false}));
    let (s, b) = json_of(get("/v1/memory/recall?project_id=p").await.unwrap()).await;
    assert_unavailable(s, b, json!({"notes": []}));
    let (s, b) = json_of(
        post("/v1/memory/recall", json!({"project_id": "p"}))
            .await
            .unwrap(),
    )
    .await;
    assert_unavailable(s, b, json!({"notes": []}));
    let (s, b) = json_of(get("/v1/memory/list?project_id=p").await.unwrap()).await;
    assert_unavailable(s, b, json!({"total": 0, "items": []}));
    let (s, b) = json_of(
        post("/v1/memory/delete", json!({"project_id": "p"}))
            .await
            .unwrap(),
    )
    .await;
    assert_unavailable(s, b, json!({"ok": false, "deleted": 0}));
    let (s, b) = json_of(get("/readyz").await.unwrap()).await;
    assert_eq!(s, 503, "{b}");
    assert_eq!(
        (
            b["status"].as_str(),
            b["checks"]["memory_store"]["status"].as_str()
        ),
        (Some("unready"), Some("down")),
        "{b}"
    );
    eventually(Duration::from_secs(20), "the load sees 503s", async || {
        unavailable() >= 3
    })
    .await;
    assert!(
        stopped_at.elapsed() < Duration::from_secs(20),
        "503s came quickly, not after long hangs"
    );

    // Start it again: the same process serves again, without a restart of Relay.
    {
        let cluster = &cluster;
        tokio::task::block_in_place(|| cluster.start());
    }
    eventually(
        Duration::from_secs(20),
        "/readyz is 200 again",
        async || get("/readyz").await.unwrap().status().as_u16() == 200,
    )
    .await;
    let (s, b) = json_of(
        post(
            "/v1/memory/remember",
            json!({"project_id": "p", "note": "after"}),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!((s, &b["ok"]), (200, &json!(true)), "{b}");
    let acked_after_restart = acked();
    eventually(
        Duration::from_secs(20),
        "the load writes again",
        async || acked() >= acked_after_restart + 20,
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();

    // Every answer was a 200 or a 503: an outage is never a 500 or a hang.
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let other: Vec<_> = seen
        .statuses
        .keys()
        .filter(|s| **s != 200 && **s != 503)
        .collect();
    assert!(other.is_empty(), "unexpected statuses: {:?}", seen.statuses);

    // Nothing acknowledged was lost.
    let mut stored = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for page in 0..100 {
        let (s, b) = json_of(
            get(&format!(
                "/v1/memory/list?project_id=p&limit=200&offset={}",
                page * 200
            ))
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(s, 200, "{b}");
        let items = b["items"].as_array().unwrap();
        if items.is_empty() {
            break;
        }
        for item in items {
            stored.insert(item["note"].as_str().unwrap().to_owned());
            assert!(
                ids.insert(item["id"].as_str().unwrap().to_owned()),
                "id twice: {item}"
            );
        }
    }
    let lost: Vec<_> = seen
        .acknowledged
        .iter()
        .filter(|t| !stored.contains(*t))
        .collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
    assert!(stored.contains("after"));
    eprintln!(
        "statuses {:?}; {} acknowledged ({} before the stop, {} after the restart), {} stored",
        seen.statuses,
        seen.acknowledged.len(),
        acked_before_stop,
        seen.acknowledged.len() - acked_after_restart,
        stored.len()
    );

    let _ = stop_server.send(());
    server.await.unwrap().unwrap();
}
