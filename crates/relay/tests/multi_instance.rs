//! Two `relay serve` processes on one PostgreSQL database, as operators run several instances
//! behind a load balancer: quota, sessions, notes and note ids hold across both.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "../../relay-server/tests/support/pg.rs"]
mod pg;

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use support::{Serve, relay, write_config};

fn pg_config(dir: &Path, url: &str) -> std::path::PathBuf {
    write_config(
        dir,
        &format!(
            "bind = \"127.0.0.1:0\"\n\
             [memory]\nurl = \"{url}\"\nmax_connections = 10\nbusy_timeout_ms = 10000\n\
             [auth]\nurl = \"{url}\"\nmax_connections = 10\nbusy_timeout_ms = 10000\n\
             argon2_memory_kib = 256\nargon2_iterations = 1\n\
             [limits]\nagent_burst = 1000\nagent_per_minute = 100000\n"
        ),
    )
}

fn users_add(config: &Path, email: &str, limit: i64, password: &str) {
    let out = relay(
        config,
        &["users", "add", email, "--limit", &limit.to_string()],
        &format!("{password}\n"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn json_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, body)
}

async fn signin(client: &reqwest::Client, base: &str, email: &str, password: &str) -> String {
    let r = client
        .post(format!("{base}/v1/auth/signin"))
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(r).await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_owned()
}

async fn me(client: &reqwest::Client, base: &str, token: &str) -> (u16, Value) {
    json_of(
        client
            .get(format!("{base}/v1/me"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// Every note of `project`, through `base`, oldest first.
async fn list(client: &reqwest::Client, base: &str, token: &str, project: &str) -> Vec<Value> {
    let r = client
        .get(format!(
            "{base}/v1/memory/list?project_id={project}&limit=200"
        ))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(r).await;
    assert_eq!(status, 200, "{body}");
    body["items"].as_array().unwrap().clone()
}

#[test]
fn two_instances_on_one_postgres_share_quota_sessions_notes_and_ids() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let db = runtime.block_on(pg::TestDb::create());
    let dir = tempfile::tempdir().unwrap();
    let config = pg_config(dir.path(), &db.url);

    // Both instances start at once on the fresh database, so their migrations race: the
    // migrator's advisory lock lets one apply them while the other waits.
    let (a, b) = (
        Serve::builder(&config).spawn(),
        Serve::builder(&config).spawn(),
    );
    let (a, b) = (a.ready(), b.ready());
    users_add(&config, "load@example.com", 50, "correct horse battery");

    runtime.block_on(async {
        let client = reqwest::Client::new();
        let token = signin(
            &client,
            &a.base,
            "load@example.com",
            "correct horse battery",
        )
        .await;

        // Quota: 200 concurrent legs, alternately through A and B, with a limit of 50.
        let legs: Vec<_> = (0..200)
            .map(|i| {
                let client = client.clone();
                // Alternately through A and B.
                let base = [&a.base, &b.base][i % 2].clone();
                let token = token.clone();
                tokio::spawn(async move {
                    let r = client
                        .post(format!("{base}/v1/agent/stream"))
                        .bearer_auth(&token)
                        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
                        .send()
                        .await
                        .unwrap();
                    let status = r.status().as_u16();
                    // Read every leg to its end, so each admitted one really ran.
                    let text = r.text().await.unwrap();
                    (i % 2, status, text)
                })
            })
            .collect();
        let (mut admitted, mut refused, mut admitted_via) = (0, 0, [0, 0]);
        for leg in legs {
            let (via, status, text) = leg.await.unwrap();
            match status {
                200 => {
                    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
                    assert_eq!(last["event"], "done", "{text}");
                    admitted += 1;
                    admitted_via[via] += 1;
                }
                403 => {
                    let body: Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(body["error"], "quota_exceeded", "{body}");
                    refused += 1;
                }
                other => panic!("leg answered {other}: {text}"),
            }
        }
        eprintln!(
            "quota: {admitted} admitted (A {}, B {}), {refused} refused",
            admitted_via[0], admitted_via[1]
        );
        assert_eq!((admitted, refused), (50, 150));
        for base in [&a.base, &b.base] {
            let (status, m) = me(&client, base, &token).await;
            assert_eq!(status, 200, "{m}");
            assert_eq!(
                (m["used"].as_i64(), m["remaining"].as_i64()),
                (Some(50), Some(0))
            );
        }

        // Sessions: a token signed out through A is refused by B.
        let session = signin(
            &client,
            &a.base,
            "load@example.com",
            "correct horse battery",
        )
        .await;
        assert_eq!(
            me(&client, &b.base, &session).await.0,
            200,
            "B accepts A's token"
        );
        let r = client
            .post(format!("{}/v1/auth/signout", a.base))
            .bearer_auth(&session)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let (status, body) = me(&client, &b.base, &session).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (401, Some("unauthorized")),
            "{body}"
        );
        assert_eq!(
            me(&client, &b.base, &token).await.0,
            200,
            "other sessions stay"
        );

        // Notes written through A are listed by B.
        for n in ["written through A", "and another"] {
            let r = client
                .post(format!("{}/v1/memory/remember", a.base))
                .bearer_auth(&token)
                .json(&json!({"project_id": "shared", "note": n}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
        }
        let texts: Vec<Value> = list(&client, &b.base, &token, "shared")
            .await
            .iter()
            .map(|n| n["note"].clone())
            .collect();
        assert_eq!(texts, [json!("written through A"), json!("and another")]);

        // Ids: 100 concurrent remembers into one project, split across A and B.
        let writes: Vec<_> = (0..100)
            .map(|i| {
                let client = client.clone();
                // Alternately through A and B.
                let base = [&a.base, &b.base][i % 2].clone();
                let token = token.clone();
                tokio::spawn(async move {
                    client
                        .post(format!("{base}/v1/memory/remember"))
                        .bearer_auth(&token)
                        .json(&json!({"project_id": "race", "note": format!("racing note {i}")}))
                        .send()
                        .await
                        .unwrap()
                        .status()
                        .as_u16()
                })
            })
            .collect();
        for w in writes {
            assert_eq!(w.await.unwrap(), 200);
        }
        let notes = list(&client, &b.base, &token, "race").await;
        let seqs: Vec<u64> = notes
            .iter()
            .map(|n| {
                n["id"]
                    .as_str()
                    .unwrap()
                    .rsplit('#')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        let distinct: BTreeSet<u64> = seqs.iter().copied().collect();
        let texts: BTreeSet<&str> = notes.iter().map(|n| n["note"].as_str().unwrap()).collect();
        eprintln!(
            "ids: {} notes, {} distinct ids, from {:?} to {:?}",
            notes.len(),
            distinct.len(),
            distinct.first(),
            distinct.last()
        );
        assert_eq!(seqs.len(), 100);
        assert_eq!(
            distinct,
            (1..=100).collect::<BTreeSet<_>>(),
            "no gap, no duplicate"
        );
        assert_eq!(texts.len(), 100, "every write is stored once");
    });
    drop((a, b));
}
