//! The memory store under failure (503 shapes, recovery). Relevance ranking for injection is a
//! store scenario, tested once against both backends in `tests/store/`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use relay_server::Stores;
use relay_server::domain::{NoteId, NoteText};
use relay_server::store::{
    InjectBudget, MemoryStore, NewNote, Note, Remembered, StoreError, StoreResult,
};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, body, open_config};

/// A real store behind a switch that makes every call fail as an unreachable store would.
struct Switchable {
    inner: Arc<dyn MemoryStore>,
    down: AtomicBool,
}

impl Switchable {
    fn check(&self) -> StoreResult<()> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::Unavailable("switched off by the test".into()))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl MemoryStore for Switchable {
    async fn remember(&self, note: NewNote) -> StoreResult<Remembered> {
        self.check()?;
        self.inner.remember(note).await
    }
    async fn recall(&self, u: &str, p: &str, limit: u32) -> StoreResult<Vec<String>> {
        self.check()?;
        self.inner.recall(u, p, limit).await
    }
    async fn list_notes(
        &self,
        u: &str,
        p: Option<&str>,
        l: u32,
        o: u64,
    ) -> StoreResult<(u64, Vec<Note>)> {
        self.check()?;
        self.inner.list_notes(u, p, l, o).await
    }
    async fn delete_note(&self, u: &str, id: &NoteId) -> StoreResult<u64> {
        self.check()?;
        self.inner.delete_note(u, id).await
    }
    async fn delete_project(&self, u: &str, p: &str) -> StoreResult<u64> {
        self.check()?;
        self.inner.delete_project(u, p).await
    }
    async fn get_note(&self, u: &str, id: &NoteId) -> StoreResult<Option<Note>> {
        self.check()?;
        self.inner.get_note(u, id).await
    }
    async fn edit_note(&self, u: &str, id: &NoteId, t: &NoteText) -> StoreResult<Option<Note>> {
        self.check()?;
        self.inner.edit_note(u, id, t).await
    }
    async fn notes_for_injection(
        &self,
        u: &str,
        p: &str,
        q: &str,
        b: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        self.check()?;
        self.inner.notes_for_injection(u, p, q, b).await
    }
    async fn delete_all_notes(&self, u: &str) -> StoreResult<u64> {
        self.check()?;
        self.inner.delete_all_notes(u).await
    }
    async fn forget_counters(&self, u: &str) -> StoreResult<()> {
        self.check()?;
        self.inner.forget_counters(u).await
    }
    async fn count_open_leg(&self) -> StoreResult<()> {
        self.check()?;
        self.inner.count_open_leg().await
    }
    async fn open_legs(&self) -> StoreResult<i64> {
        self.check()?;
        self.inner.open_legs().await
    }
    async fn ping(&self) -> StoreResult<()> {
        self.check()?;
        self.inner.ping().await
    }
}

#[tokio::test]
async fn an_unavailable_store_gives_503_with_emptied_shapes_and_service_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let config = open_config(dir.path());
    let mut stores = Stores::open(&config).await.unwrap();
    let switch = Arc::new(Switchable {
        inner: stores.memory.memory.clone(),
        down: AtomicBool::new(false),
    });
    stores.memory.memory = switch.clone();
    let app = TestApp::spawn(config, stores, dir).await;
    app.remember(None, "p", "before the outage").await;

    switch.down.store(true, Ordering::SeqCst);
    let id_path = "/v1/memory/mem%23local%23p%231";
    let cases = vec![
        (
            app.remember(None, "p", "during").await,
            json!({"ok": false}),
        ),
        (
            app.get("/v1/memory/recall?project_id=p", None).await,
            json!({"notes": []}),
        ),
        (
            app.post("/v1/memory/recall", None, &json!({"project_id": "p"}))
                .await,
            json!({"notes": []}),
        ),
        (
            app.get("/v1/memory/list", None).await,
            json!({"total": 0, "items": []}),
        ),
        (
            app.post("/v1/memory/delete", None, &json!({"all": true}))
                .await,
            json!({"ok": false, "deleted": 0}),
        ),
        (
            app.delete("/v1/memory/all", None).await,
            json!({"ok": false, "deleted": 0}),
        ),
        (
            app.delete(id_path, None).await,
            json!({"ok": false, "deleted": 0}),
        ),
        (
            app.patch(id_path, None, &json!({"content": "x"})).await,
            json!({"ok": false}),
        ),
    ];
    for (r, shape) in cases {
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let mut b = body(r).await;
        assert_eq!(b["error"], "store_unavailable");
        assert!(b["message"].as_str().is_some());
        assert!(
            !b["message"].as_str().unwrap().contains("switched off"),
            "internal detail leaked"
        );
        let obj = b.as_object_mut().unwrap();
        obj.remove("error");
        obj.remove("message");
        assert_eq!(b, shape);
    }
    assert_eq!(
        app.get("/readyz", None).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );

    switch.down.store(false, Ordering::SeqCst);
    assert_eq!(
        app.recall(None, "p").await,
        ["before the outage"],
        "nothing acknowledged was lost"
    );
    assert_eq!(
        app.remember(None, "p", "after").await.status(),
        StatusCode::OK
    );
    assert_eq!(app.get("/readyz", None).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_locked_sqlite_file_gives_503_and_writes_resume_when_it_is_released() {
    if crate::helpers::on_postgres() {
        // PostgreSQL has no file lock; tests/pg_restart.rs stops the server instead.
        eprintln!("sqlite-only: locks the SQLite file");
        return;
    }
    let app = TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.memory.busy_timeout_ms = 200;
        c
    })
    .await;
    app.remember(None, "p", "kept").await;
    let mut locker = {
        use sqlx::ConnectOptions;
        sqlx::sqlite::SqliteConnectOptions::new()
            .filename(app.dir.path().join("relay.db"))
            .connect()
            .await
            .unwrap()
    };
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut locker)
        .await
        .unwrap();
    let r = app.remember(None, "p", "blocked").await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let b = body(r).await;
    assert_eq!(
        (b["ok"].as_bool(), b["error"].as_str()),
        (Some(false), Some("store_unavailable"))
    );
    let r = app
        .post("/v1/memory/delete", None, &json!({"project_id": "p"}))
        .await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);

    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    assert_eq!(
        app.remember(None, "p", "after").await.status(),
        StatusCode::OK
    );
    assert_eq!(app.recall(None, "p").await, ["kept", "after"]);
}
