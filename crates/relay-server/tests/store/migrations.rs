//! Opening a store: readiness, migrations run once by instances that start together, and
//! connections the server ended replaced.

use relay_server::domain::Role;
use relay_server::store::{Admission, Opener};

use crate::{Fixture, OPTIONS, new_user, note, pg};

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
        [
            (1, true),
            (2, true),
            (17, true),
            (18, true),
            (19, true),
            (35, true),
            (36, true)
        ]
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
    end_every_connection(&db).await;
    // The pool notices the dead connections and opens new ones, so the store works again at once.
    store.memory.ping().await.unwrap();
    assert!(store.memory.recall("u1", "p", 10).await.unwrap().is_empty());
}

/// The same for a leg's own statements, which run on connections kept apart from the pool's
/// queue and untested while in steady use (`store::postgres::held`): the session check, the
/// admission and the refund work on the first try after the server ended every connection, and
/// the quota counts each exactly once.
#[tokio::test]
async fn postgres_leg_statements_work_at_once_after_the_server_ended_their_connections() {
    let db = pg::TestDb::create().await;
    let store = Opener::default()
        .open(&db.url, "memory.url", &OPTIONS)
        .await
        .unwrap();
    let auth = &store.auth;
    auth.create_user(new_user("u_leg", "leg@example.com", Role::User, 10, 1.0))
        .await
        .unwrap();
    auth.create_session("tok", "u_leg", 1.0, f64::MAX)
        .await
        .unwrap();
    // Warm: the statements' connections are open and idle.
    assert!(auth.session_user("tok", 2.0).await.unwrap().is_some());
    assert_eq!(auth.admit_leg("u_leg").await.unwrap(), Admission::Admitted);

    end_every_connection(&db).await;

    // The admission first: a session check that met the ended connection would fall back to
    // the pool by itself (an unreadable version bypasses the cache) and take it out of the way.
    assert_eq!(
        auth.admit_leg("u_leg").await.unwrap(),
        Admission::Admitted,
        "the admission works at once"
    );
    assert!(auth.session_user("tok", 3.0).await.unwrap().is_some());
    auth.refund_leg("u_leg").await.unwrap();
    let (user, _) = auth
        .user_by_email("leg@example.com")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        user.used, 1,
        "two admissions and one refund, each counted once"
    );
}

/// Ends every session of `db` from the server side, as an administrator's shutdown would, and
/// waits until each is gone.
async fn end_every_connection(db: &pg::TestDb) {
    let admin = sqlx::PgPool::connect(&pg::admin_url()).await.unwrap();
    sqlx::query(
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
         WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(&db.name)
    .execute(&admin)
    .await
    .unwrap();
}
