//! Opening a store: readiness, migrations run once by instances that start together, and
//! connections the server ended replaced.

use relay_server::store::Opener;

use crate::{Fixture, OPTIONS, note, pg};

conformance!(ping_answers,);

async fn ping_answers(f: &Fixture) {
    f.store.auth.ping().await.unwrap();
    f.store.memory.ping().await.unwrap();
}

/// Instances that start together on a fresh database all open it: sqlx's PostgreSQL migrator
/// holds `pg_advisory_lock` while it migrates, so one applies each migration and the others find
/// it applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_migrations_are_safe_when_instances_start_together() {
    let db = pg::TestDb::create().await;
    let opens: Vec<_> = (0..6)
        .map(|_| {
            let url = db.url.clone();
            tokio::spawn(async move {
                let store = Opener::default()
                    .open(&url, "memory.url", &OPTIONS)
                    .await
                    .unwrap();
                store.memory.ping().await.unwrap();
                store
            })
        })
        .collect();
    let mut stores = Vec::new();
    for o in opens {
        stores.push(o.await.unwrap());
    }
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let applied: Vec<(i64, bool)> =
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        applied,
        [(1, true), (2, true), (17, true), (18, true), (19, true)]
    );
    // They share one store: a note through one is seen through another.
    stores[0]
        .memory
        .remember(note("u1", "p", "shared", 1.0))
        .await
        .unwrap();
    assert_eq!(
        stores[5].memory.recall("u1", "p", 10).await.unwrap(),
        ["shared"]
    );
}

/// Connections the server ended (as a restart ends them) are replaced before a caller gets one,
/// so the store serves again without a restart of Relay. tests/pg_restart.rs stops a whole server.
#[tokio::test]
async fn postgres_connections_the_server_ended_are_replaced() {
    let db = pg::TestDb::create().await;
    let store = Opener::default()
        .open(&db.url, "memory.url", &OPTIONS)
        .await
        .unwrap();
    // End every session of the store from the server side, as an administrator's shutdown would.
    let admin = sqlx::PgPool::connect(&pg::admin_url()).await.unwrap();
    let _ = sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(&db.name)
    .execute(&admin)
    .await
    .unwrap();
    // The pool notices the dead connections and opens new ones, so the store works again at once.
    store.memory.ping().await.unwrap();
    assert!(store.memory.recall("u1", "p", 10).await.unwrap().is_empty());
}
