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
            (36, true),
            (37, true),
            (38, true),
            (40, true),
            (42, true),
            (44, true),
            (46, true)
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

/// Records stored before the daily roll-up existed (migration 0036) are summed into it when that
/// migration runs, so `GET /v1/usage` keeps showing them.
#[tokio::test]
async fn the_daily_rollup_migration_sums_the_records_already_stored() {
    use relay_server::store::usage::{GroupBy, LegRecord, UsageQuery};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("relay.db").display());
    let now = relay_server::clock::now() as i64;
    let record = |input: i64, project: Option<&str>| LegRecord {
        user_id: "u1".into(),
        request_id: format!("r{input}"),
        at: now,
        route: relay_server::domain::Door::Agent,
        model: "m1".into(),
        provider: "p".into(),
        project_id: project.map(str::to_owned),
        status: "ok",
        input_tokens: input,
        cached_input_tokens: 1,
        cache_write_tokens: 0,
        output_tokens: 2,
        reasoning_tokens: 0,
        ttfb_ms: 1,
        duration_ms: 2,
        cost_usd: Some(0.5),
        reservation: None,
        estimated: false,
        server_tool_uses: 0,
    };
    let query = UsageQuery {
        user_id: Some("u1".into()),
        from: now - 86_400,
        to: now,
        group_by: GroupBy::Project,
    };
    let sorted = |mut rows: Vec<relay_server::store::usage::UsageSums>| {
        rows.sort_by(|a, b| a.key.cmp(&b.key));
        rows
    };
    let store = Opener::default()
        .open(&url, "memory.url", &OPTIONS)
        .await
        .unwrap();
    store
        .usage
        .insert_legs(&[record(100, Some("p1")), record(5, None), record(7, None)])
        .await
        .unwrap();
    let before = sorted(store.usage.aggregate(&query).await.unwrap());
    assert_eq!(before.len(), 2, "{before:?}");
    assert_eq!((before[0].key.as_deref(), before[0].legs), (None, 2));
    drop(store);
    // Back to the schema before 0036: no roll-up, the migration not applied.
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("DROP TABLE usage_daily")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 36")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let store = Opener::default()
        .open(&url, "memory.url", &OPTIONS)
        .await
        .unwrap();
    assert_eq!(sorted(store.usage.aggregate(&query).await.unwrap()), before);
}
