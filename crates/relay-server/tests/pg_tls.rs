//! PostgreSQL over TLS: `sslmode` and `sslrootcert` in the store URL are honoured, as libpq reads
//! them. Runs against the machine's shared server, which has TLS on (Debian's default, with its
//! snake-oil certificate); `pg_stat_ssl` says whether each of Relay's connections is encrypted.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "support/pg.rs"]
mod pg;

use std::time::Duration;

use relay_server::store::{Opener, StoreOptions};
use sqlx::Connection;

fn options() -> StoreOptions {
    StoreOptions {
        max_connections: 2,
        busy_timeout: Duration::from_secs(10),
    }
}

fn with_params(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

/// `(ssl, version)` of every connection the store opened (application name `relay`) to `db`.
async fn relay_connections(db: &str) -> Vec<(bool, Option<String>)> {
    let mut conn = sqlx::PgConnection::connect(&pg::admin_url()).await.unwrap();
    let server_tls: String = sqlx::query_scalar("SHOW ssl")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        server_tls, "on",
        "the test PostgreSQL must have ssl = on (Debian's default; see postgresql.conf)"
    );
    sqlx::query_as(
        "SELECT s.ssl, s.version FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.datname = $1 AND a.application_name = 'relay'",
    )
    .bind(db)
    .fetch_all(&mut conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn sslmode_require_encrypts_every_connection() {
    let db = pg::TestDb::create().await;
    let url = with_params(&db.url, "sslmode=require");
    let backend = Opener::default()
        .open(&url, "memory.url", &options())
        .await
        .unwrap();
    backend.memory.ping().await.unwrap();
    let conns = relay_connections(&db.name).await;
    assert!(!conns.is_empty(), "the store holds a connection");
    for (ssl, version) in &conns {
        assert!(*ssl, "connection not encrypted: {conns:?}");
        assert!(version.as_deref().is_some_and(|v| v.starts_with("TLS")));
    }
}

#[tokio::test]
async fn sslmode_disable_stays_in_clear() {
    let db = pg::TestDb::create().await;
    let url = with_params(&db.url, "sslmode=disable");
    let backend = Opener::default()
        .open(&url, "memory.url", &options())
        .await
        .unwrap();
    backend.memory.ping().await.unwrap();
    let conns = relay_connections(&db.name).await;
    assert!(!conns.is_empty());
    assert!(conns.iter().all(|(ssl, _)| !ssl), "{conns:?}");
}

#[tokio::test]
async fn default_prefers_tls() {
    let db = pg::TestDb::create().await;
    let backend = Opener::default()
        .open(&db.url, "memory.url", &options())
        .await
        .unwrap();
    backend.memory.ping().await.unwrap();
    let conns = relay_connections(&db.name).await;
    assert!(!conns.is_empty());
    assert!(conns.iter().all(|(ssl, _)| *ssl), "{conns:?}");
}

#[tokio::test]
async fn verify_ca_accepts_the_servers_own_certificate() {
    let db = pg::TestDb::create().await;
    let mut conn = sqlx::PgConnection::connect(&pg::admin_url()).await.unwrap();
    let cert: String = sqlx::query_scalar("SHOW ssl_cert_file")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let cert = std::path::Path::new(&cert);
    assert!(
        cert.is_absolute() && std::fs::read(cert).is_ok(),
        "the server's certificate {} is readable here",
        cert.display()
    );
    let url = with_params(
        &db.url,
        &format!("sslmode=verify-ca&sslrootcert={}", cert.display()),
    );
    let backend = Opener::default()
        .open(&url, "memory.url", &options())
        .await
        .unwrap();
    backend.memory.ping().await.unwrap();
    let conns = relay_connections(&db.name).await;
    assert!(!conns.is_empty() && conns.iter().all(|(ssl, _)| *ssl));
}

#[tokio::test]
async fn verify_full_with_a_wrong_root_is_refused_at_start_up() {
    let db = pg::TestDb::create().await;
    let wrong = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/wrong-root.pem");
    // By name, so only the root can be what is wrong (the server's certificate is for localhost).
    let url = with_params(
        &db.url.replacen("127.0.0.1", "localhost", 1),
        &format!("sslmode=verify-full&sslrootcert={wrong}"),
    );
    let err = match Opener::default().open(&url, "memory.url", &options()).await {
        Ok(_) => panic!("a server certificate signed by another root was accepted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(err.contains("TLS failed"), "{err}");
    assert!(err.contains("sslrootcert"), "{err}");
    assert!(!err.contains("postgres@"), "no user in the message: {err}");
    assert!(relay_connections(&db.name).await.is_empty());
}
