//! One storage conformance suite, run against every backend: each scenario is written once against
//! the `AuthStore` and `MemoryStore` traits and called for SQLite (a temporary file) and PostgreSQL
//! (a fresh database on the test server), so both backends keep the same contract.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "support/pg.rs"]
mod pg;

use std::collections::BTreeSet;
use std::time::Duration;

use relay_server::domain::{Email, NoteText, ProjectId, Role};
use relay_server::store::{
    Admission, Backend, InjectBudget, NewNote, NewUser, Opener, StoreError, StoreOptions,
    UserChanges,
};

const OPTIONS: StoreOptions = StoreOptions {
    max_connections: 8,
    busy_timeout: Duration::from_secs(5),
};

/// An opened backend and what keeps its storage alive; `inspect` reads tables directly.
struct Fixture {
    store: Backend,
    inspect: Inspect,
    _dir: Option<tempfile::TempDir>,
    _db: Option<pg::TestDb>,
}

/// Direct access to the backend's tables, for what the traits do not expose (leftover rows).
enum Inspect {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Fixture {
    async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("relay.db").display());
        let store = Opener::default()
            .open(&url, "memory.url", &OPTIONS)
            .await
            .unwrap();
        let inspect = Inspect::Sqlite(sqlx::SqlitePool::connect(&url).await.unwrap());
        Self {
            store,
            inspect,
            _dir: Some(dir),
            _db: None,
        }
    }

    async fn postgres() -> Self {
        let db = pg::TestDb::create().await;
        let store = Opener::default()
            .open(&db.url, "memory.url", &OPTIONS)
            .await
            .unwrap();
        let inspect = Inspect::Postgres(sqlx::PgPool::connect(&db.url).await.unwrap());
        Self {
            store,
            inspect,
            _dir: None,
            _db: Some(db),
        }
    }

    /// Rows in `table` whose `user_id` is `user`.
    async fn rows_of(&self, table: &str, user: &str) -> i64 {
        let sql = match table {
            "notes" => "notes",
            "note_counters" => "note_counters",
            other => panic!("no table {other}"),
        };
        match &self.inspect {
            Inspect::Sqlite(p) => sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {sql} WHERE user_id = ?"
            )))
            .bind(user)
            .fetch_one(p)
            .await
            .unwrap(),
            Inspect::Postgres(p) => sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {sql} WHERE user_id = $1"
            )))
            .bind(user)
            .fetch_one(p)
            .await
            .unwrap(),
        }
    }

    /// Full-text index entries: (all of them, those whose note is gone, those matching `word`).
    async fn index_rows(&self, word: &str) -> (i64, i64, i64) {
        match &self.inspect {
            Inspect::Sqlite(p) => {
                let all = sqlx::query_scalar("SELECT count(*) FROM notes_fts")
                    .fetch_one(p)
                    .await
                    .unwrap();
                let orphans = sqlx::query_scalar(
                    "SELECT count(*) FROM notes_fts WHERE rowid NOT IN (SELECT pk FROM notes)",
                )
                .fetch_one(p)
                .await
                .unwrap();
                let hits = sqlx::query_scalar(
                    "SELECT count(*) FROM notes_fts WHERE notes_fts MATCH 'note : ' || ?",
                )
                .bind(word)
                .fetch_one(p)
                .await
                .unwrap();
                (all, orphans, hits)
            }
            // The vector is a generated column of `notes`: it cannot outlive its note.
            Inspect::Postgres(p) => {
                let (all, hits) = sqlx::query_as(
                    "SELECT count(search), count(*) FILTER (WHERE search @@ plainto_tsquery('english', $1))
                     FROM notes",
                )
                .bind(word)
                .fetch_one(p)
                .await
                .unwrap();
                (all, 0, hits)
            }
        }
    }

    async fn waitlist(&self) -> Vec<(String, String)> {
        let sql = "SELECT email, source FROM waitlist ORDER BY email";
        match &self.inspect {
            Inspect::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
            Inspect::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
        }
    }
}

/// Runs every scenario named on both backends, as `sqlite::NAME` and `postgres::NAME`.
macro_rules! conformance {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    super::$scenario(&super::Fixture::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    super::$scenario(&super::Fixture::postgres().await).await;
                }
            )*
        }
    };
}

conformance!(
    users_are_created_found_updated_and_deleted,
    a_taken_email_is_a_conflict,
    sessions_expire_and_end_on_delete,
    admission_stops_at_the_limit_and_refunds_give_back,
    concurrent_admission_takes_exactly_what_is_left,
    the_waitlist_is_idempotent,
    remember_numbers_per_project_and_dedupes_folded_text,
    ids_are_never_reused_after_deletes,
    concurrent_remembers_get_distinct_gap_free_ids,
    concurrent_equal_remembers_store_one_note,
    recall_gives_the_newest_oldest_first,
    list_pages_with_totals,
    deletes_touch_only_the_callers_notes,
    the_cascade_leaves_no_row_or_index_entry_and_keeps_the_counters,
    edits_keep_the_index_in_step,
    injection_is_whole_ranked_or_nothing,
    injection_keeps_the_budget,
    open_mode_legs_are_counted,
    ping_answers,
);

/// Opens every pooled connection first: a race is only a race when no writer waits for a new
/// connection while another finishes.
async fn warm_up(f: &Fixture) {
    let calls: Vec<_> = (0..2 * OPTIONS.max_connections)
        .map(|_| {
            let mem = f.store.memory.clone();
            tokio::spawn(async move { mem.recall("nobody", "warm", 1).await.unwrap() })
        })
        .collect();
    for c in calls {
        c.await.unwrap();
    }
}

fn new_user(id: &str, email: &str, role: Role, limit: i64, created_at: f64) -> NewUser {
    NewUser {
        id: id.into(),
        email: Email::parse(email).unwrap(),
        password_hash: format!("$argon2id$fake${id}"),
        role,
        limit,
        created_at,
    }
}

fn note(user: &str, project: &str, text: &str, created_at: f64) -> NewNote {
    NewNote {
        user_id: user.into(),
        project_id: ProjectId::parse(project).unwrap(),
        text: NoteText::parse(text, "note").unwrap(),
        author: "user".into(),
        mem_type: "note".into(),
        created_at,
    }
}

async fn users_are_created_found_updated_and_deleted(f: &Fixture) {
    let auth = &f.store.auth;
    let ada = auth
        .create_user(new_user("u_a", "ada@example.com", Role::User, 10, 2.0))
        .await
        .unwrap();
    assert_eq!((ada.id.as_str(), ada.used, ada.limit), ("u_a", 0, 10));
    auth.create_user(new_user("u_b", "bob@example.com", Role::Admin, -1, 1.0))
        .await
        .unwrap();

    let (found, hash) = auth
        .user_by_email("ada@example.com")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, ada);
    assert_eq!(hash, "$argon2id$fake$u_a");
    assert!(
        auth.user_by_email("nobody@example.com")
            .await
            .unwrap()
            .is_none()
    );

    let emails: Vec<String> = auth
        .list_users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.email)
        .collect();
    assert_eq!(
        emails,
        ["bob@example.com", "ada@example.com"],
        "by creation time"
    );

    let changed = auth
        .update_user(
            "ada@example.com",
            UserChanges {
                role: Some(Role::Admin),
                limit: Some(42),
                reset_usage: false,
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((changed.role, changed.limit), (Role::Admin, 42));
    assert_eq!(auth.admit_leg("u_a").await.unwrap(), Admission::Admitted);
    let kept = auth
        .update_user("ada@example.com", UserChanges::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (kept.role, kept.limit, kept.used),
        (Role::Admin, 42, 1),
        "nothing asked, nothing changed"
    );
    let reset = auth
        .update_user(
            "ada@example.com",
            UserChanges {
                reset_usage: true,
                ..UserChanges::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reset.used, 0);
    assert!(
        auth.update_user("nobody@example.com", UserChanges::default())
            .await
            .unwrap()
            .is_none()
    );

    auth.create_session("h_a", "u_a", 0.0, 100.0).await.unwrap();
    let gone = auth.delete_user("ada@example.com").await.unwrap().unwrap();
    assert_eq!(gone.id, "u_a");
    assert!(
        auth.user_by_email("ada@example.com")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        auth.session_user("h_a", 1.0).await.unwrap().is_none(),
        "sessions go with the account"
    );
    assert!(auth.delete_user("ada@example.com").await.unwrap().is_none());
    assert_eq!(auth.list_users().await.unwrap().len(), 1);
}

async fn a_taken_email_is_a_conflict(f: &Fixture) {
    let auth = &f.store.auth;
    auth.create_user(new_user("u_1", "taken@example.com", Role::User, 5, 0.0))
        .await
        .unwrap();
    let err = auth
        .create_user(new_user("u_2", "taken@example.com", Role::User, 5, 0.0))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert_eq!(auth.list_users().await.unwrap().len(), 1);
}

async fn sessions_expire_and_end_on_delete(f: &Fixture) {
    let auth = &f.store.auth;
    auth.create_user(new_user("u_s", "s@example.com", Role::User, 5, 0.0))
        .await
        .unwrap();
    auth.create_session("hash1", "u_s", 100.0, 200.0)
        .await
        .unwrap();
    auth.create_session("hash2", "u_s", 100.0, 200.0)
        .await
        .unwrap();
    assert_eq!(
        auth.session_user("hash1", 150.0)
            .await
            .unwrap()
            .unwrap()
            .email,
        "s@example.com"
    );
    assert!(
        auth.session_user("hash1", 200.0).await.unwrap().is_none(),
        "expired at expires_at"
    );
    assert!(auth.session_user("unknown", 150.0).await.unwrap().is_none());
    auth.delete_session("hash1").await.unwrap();
    assert!(auth.session_user("hash1", 150.0).await.unwrap().is_none());
    assert!(
        auth.session_user("hash2", 150.0).await.unwrap().is_some(),
        "only that session ends"
    );
    auth.delete_session("never-existed").await.unwrap();
}

async fn admission_stops_at_the_limit_and_refunds_give_back(f: &Fixture) {
    let auth = &f.store.auth;
    auth.create_user(new_user("u_q", "q@example.com", Role::User, 3, 0.0))
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(auth.admit_leg("u_q").await.unwrap(), Admission::Admitted);
    }
    assert_eq!(
        auth.admit_leg("u_q").await.unwrap(),
        Admission::QuotaExceeded
    );
    let used = |u: Option<(relay_server::store::User, String)>| u.unwrap().0.used;
    assert_eq!(
        used(auth.user_by_email("q@example.com").await.unwrap()),
        3,
        "a refusal takes nothing"
    );
    auth.refund_leg("u_q").await.unwrap();
    assert_eq!(used(auth.user_by_email("q@example.com").await.unwrap()), 2);
    assert_eq!(auth.admit_leg("u_q").await.unwrap(), Admission::Admitted);

    auth.create_user(new_user("u_z", "z@example.com", Role::User, 3, 0.0))
        .await
        .unwrap();
    auth.refund_leg("u_z").await.unwrap();
    assert_eq!(
        used(auth.user_by_email("z@example.com").await.unwrap()),
        0,
        "never below zero"
    );

    auth.create_user(new_user("u_adm", "adm@example.com", Role::Admin, 0, 0.0))
        .await
        .unwrap();
    auth.create_user(new_user("u_inf", "inf@example.com", Role::User, -1, 0.0))
        .await
        .unwrap();
    for _ in 0..5 {
        assert_eq!(auth.admit_leg("u_adm").await.unwrap(), Admission::Admitted);
        assert_eq!(auth.admit_leg("u_inf").await.unwrap(), Admission::Admitted);
    }
    assert_eq!(
        auth.admit_leg("ghost").await.unwrap(),
        Admission::QuotaExceeded
    );
}

async fn concurrent_admission_takes_exactly_what_is_left(f: &Fixture) {
    let auth = f.store.auth.clone();
    auth.create_user(new_user("u_c", "c@example.com", Role::User, 25, 0.0))
        .await
        .unwrap();
    for _ in 0..20 {
        auth.admit_leg("u_c").await.unwrap();
    }
    warm_up(f).await;
    let legs: Vec<_> = (0..20)
        .map(|_| {
            let auth = auth.clone();
            tokio::spawn(async move { auth.admit_leg("u_c").await.unwrap() })
        })
        .collect();
    let mut admitted = 0;
    for leg in legs {
        if leg.await.unwrap() == Admission::Admitted {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 5, "20 concurrent legs with 5 units left");
    let (u, _) = auth.user_by_email("c@example.com").await.unwrap().unwrap();
    assert_eq!(u.used, 25);
}

async fn the_waitlist_is_idempotent(f: &Fixture) {
    let auth = &f.store.auth;
    auth.add_to_waitlist("fan@example.com", "hn", 1.0)
        .await
        .unwrap();
    auth.add_to_waitlist("fan@example.com", "web", 2.0)
        .await
        .unwrap();
    auth.add_to_waitlist("new@example.com", "web", 3.0)
        .await
        .unwrap();
    assert_eq!(
        f.waitlist().await,
        [
            ("fan@example.com".to_owned(), "hn".to_owned()),
            ("new@example.com".to_owned(), "web".to_owned())
        ],
        "the first signup stays as it was"
    );
}

async fn remember_numbers_per_project_and_dedupes_folded_text(f: &Fixture) {
    let mem = &f.store.memory;
    let r1 = mem
        .remember(note("u1", "p", "first  note", 1.0))
        .await
        .unwrap();
    let r2 = mem.remember(note("u1", "p", "second", 2.0)).await.unwrap();
    assert_eq!((r1.id.as_str(), r1.created), ("mem#u1#p#1", true));
    assert_eq!((r2.id.as_str(), r2.created), ("mem#u1#p#2", true));
    let dup = mem
        .remember(note("u1", "p", "first\n\tnote", 3.0))
        .await
        .unwrap();
    assert_eq!(
        (dup.id.as_str(), dup.created),
        ("mem#u1#p#1", false),
        "whitespace folded"
    );
    let r3 = mem
        .remember(note("u1", "p", "First note", 4.0))
        .await
        .unwrap();
    assert_eq!(
        r3.id, "mem#u1#p#3",
        "case matters; the duplicate took no id"
    );
    assert_eq!(
        mem.remember(note("u1", "q", "first note", 5.0))
            .await
            .unwrap()
            .id,
        "mem#u1#q#1",
        "each project counts from 1 and dedupes on its own"
    );
    assert_eq!(
        mem.remember(note("u2", "p", "first note", 6.0))
            .await
            .unwrap()
            .id,
        "mem#u2#p#1"
    );
    let stored = mem.get_note("u1", "mem#u1#p#1").await.unwrap().unwrap();
    assert_eq!(
        (
            stored.note.as_str(),
            stored.project_id.as_str(),
            stored.author.as_str(),
            stored.mem_type.as_str(),
            stored.created_at
        ),
        ("first  note", "p", "user", "note", 1.0),
        "stored as given"
    );
    let mut typed = note("u1", "p", "a decision", 7.5);
    typed.author = "agent".into();
    typed.mem_type = "decision".into();
    let id = mem.remember(typed).await.unwrap().id;
    let got = mem.get_note("u1", &id).await.unwrap().unwrap();
    assert_eq!(
        (got.author.as_str(), got.mem_type.as_str(), got.created_at),
        ("agent", "decision", 7.5)
    );
    assert!(
        mem.get_note("u2", &id).await.unwrap().is_none(),
        "never another user's"
    );
}

async fn ids_are_never_reused_after_deletes(f: &Fixture) {
    let mem = &f.store.memory;
    for i in 1..=3 {
        mem.remember(note("u1", "p", &format!("n{i}"), f64::from(i)))
            .await
            .unwrap();
    }
    assert_eq!(mem.delete_note("u1", "mem#u1#p#3").await.unwrap(), 1);
    assert_eq!(
        mem.remember(note("u1", "p", "n4", 4.0)).await.unwrap().id,
        "mem#u1#p#4"
    );
    assert_eq!(mem.delete_project("u1", "p").await.unwrap(), 3);
    assert_eq!(
        mem.remember(note("u1", "p", "n5", 5.0)).await.unwrap().id,
        "mem#u1#p#5"
    );
    assert_eq!(
        mem.remember(note("u1", "p", "n1", 6.0)).await.unwrap().id,
        "mem#u1#p#6",
        "a deleted note's text is new again, under a new id"
    );
    // The GDPR cascade removes every note but keeps the counters: an id is never reused.
    mem.delete_all_notes("u1").await.unwrap();
    assert_eq!(
        mem.remember(note("u1", "p", "again", 7.0))
            .await
            .unwrap()
            .id,
        "mem#u1#p#7"
    );
    // Only deleting the account (whose id is never issued again) drops them.
    mem.delete_all_notes("u1").await.unwrap();
    mem.forget_counters("u1").await.unwrap();
    assert_eq!(
        mem.remember(note("u1", "p", "fresh", 8.0))
            .await
            .unwrap()
            .id,
        "mem#u1#p#1"
    );
}

async fn concurrent_remembers_get_distinct_gap_free_ids(f: &Fixture) {
    warm_up(f).await;
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let mem = f.store.memory.clone();
            tokio::spawn(async move {
                mem.remember(note("u1", "p", &format!("note number {i}"), 1.0))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut seqs = BTreeSet::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert!(r.created);
        let seq: i64 = r.id.rsplit('#').next().unwrap().parse().unwrap();
        assert!(seqs.insert(seq), "id {} given twice", r.id);
    }
    assert_eq!(seqs, (1..=40).collect::<BTreeSet<_>>());
}

async fn concurrent_equal_remembers_store_one_note(f: &Fixture) {
    warm_up(f).await;
    for round in 1..=5 {
        let tasks: Vec<_> = (0..12)
            .map(|i| {
                let mem = f.store.memory.clone();
                // The same folded text, spaced differently by each writer.
                let text = format!("same{}note {round}", " ".repeat(i % 3 + 1));
                tokio::spawn(
                    async move { mem.remember(note("u1", "p", &text, 1.0)).await.unwrap() },
                )
            })
            .collect();
        let mut created = 0;
        for t in tasks {
            let r = t.await.unwrap();
            assert_eq!(r.id, format!("mem#u1#p#{round}"), "round {round}");
            created += usize::from(r.created);
        }
        assert_eq!(created, 1, "round {round}");
    }
    assert_eq!(
        f.store
            .memory
            .list_notes("u1", None, 10, 0)
            .await
            .unwrap()
            .0,
        5
    );
    assert_eq!(
        f.store
            .memory
            .remember(note("u1", "p", "next", 2.0))
            .await
            .unwrap()
            .id,
        "mem#u1#p#6",
        "no id was spent on the duplicates"
    );
}

async fn recall_gives_the_newest_oldest_first(f: &Fixture) {
    let mem = &f.store.memory;
    // Written out of time order, with a tie at 3.0 broken by id order.
    for (t, text) in [
        (5.0, "e"),
        (1.0, "a"),
        (3.0, "c1"),
        (3.0, "c2"),
        (2.0, "b"),
        (4.0, "d"),
    ] {
        mem.remember(note("u1", "p", text, t)).await.unwrap();
    }
    mem.remember(note("u1", "other", "x", 9.0)).await.unwrap();
    mem.remember(note("u2", "p", "y", 9.0)).await.unwrap();
    assert_eq!(
        mem.recall("u1", "p", 200).await.unwrap(),
        ["a", "b", "c1", "c2", "d", "e"]
    );
    assert_eq!(mem.recall("u1", "p", 3).await.unwrap(), ["c2", "d", "e"]);
    assert!(mem.recall("u1", "empty", 10).await.unwrap().is_empty());
}

async fn list_pages_with_totals(f: &Fixture) {
    let mem = &f.store.memory;
    for i in 0..5 {
        mem.remember(note("u1", "p", &format!("p{i}"), 10.0 + f64::from(i)))
            .await
            .unwrap();
        mem.remember(note("u1", "q", &format!("q{i}"), 10.5 + f64::from(i)))
            .await
            .unwrap();
    }
    mem.remember(note("u2", "p", "not mine", 1.0))
        .await
        .unwrap();
    let texts = |notes: &[relay_server::store::Note]| -> Vec<String> {
        notes.iter().map(|n| n.note.clone()).collect()
    };
    let (total, page) = mem.list_notes("u1", Some("p"), 2, 1).await.unwrap();
    assert_eq!(
        (total, texts(&page)),
        (5, vec!["p1".to_owned(), "p2".to_owned()])
    );
    let (total, page) = mem.list_notes("u1", None, 3, 0).await.unwrap();
    assert_eq!(
        (total, texts(&page)),
        (10, vec!["p0".to_owned(), "q0".to_owned(), "p1".to_owned()])
    );
    let (total, page) = mem.list_notes("u1", None, 200, 8).await.unwrap();
    assert_eq!(
        (total, texts(&page)),
        (10, vec!["p4".to_owned(), "q4".to_owned()])
    );
    let (total, page) = mem.list_notes("u1", Some("q"), 10, 50).await.unwrap();
    assert_eq!(
        (total, page.len()),
        (5, 0),
        "a page past the end still counts"
    );
    let (total, page) = mem.list_notes("u3", None, 10, 0).await.unwrap();
    assert_eq!((total, page.len()), (0, 0));

    // Equal times order by id, byte-wise: "#10" sorts before "#9".
    for i in 0..11 {
        mem.remember(note("u4", "t", &format!("tie {i}"), 1.0))
            .await
            .unwrap();
    }
    let (_, page) = mem.list_notes("u4", Some("t"), 3, 0).await.unwrap();
    let ids: Vec<&str> = page.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["mem#u4#t#1", "mem#u4#t#10", "mem#u4#t#11"]);
}

async fn deletes_touch_only_the_callers_notes(f: &Fixture) {
    let mem = &f.store.memory;
    mem.remember(note("u1", "p", "a1", 1.0)).await.unwrap();
    mem.remember(note("u1", "p", "a2", 2.0)).await.unwrap();
    mem.remember(note("u1", "q", "a3", 3.0)).await.unwrap();
    mem.remember(note("u2", "p", "b1", 4.0)).await.unwrap();
    assert_eq!(
        mem.delete_note("u2", "mem#u1#p#1").await.unwrap(),
        0,
        "not u2's"
    );
    assert_eq!(mem.delete_note("u1", "mem#u1#p#9").await.unwrap(), 0);
    assert_eq!(mem.delete_note("u1", "mem#u1#p#1").await.unwrap(), 1);
    assert_eq!(
        mem.delete_note("u1", "mem#u1#p#1").await.unwrap(),
        0,
        "already gone"
    );
    assert!(mem.get_note("u1", "mem#u1#p#1").await.unwrap().is_none());
    assert_eq!(mem.delete_project("u2", "q").await.unwrap(), 0);
    assert_eq!(mem.delete_project("u1", "p").await.unwrap(), 1);
    assert_eq!(mem.recall("u1", "q", 10).await.unwrap(), ["a3"]);
    assert_eq!(mem.recall("u2", "p", 10).await.unwrap(), ["b1"]);
    assert_eq!(mem.delete_all_notes("u1").await.unwrap(), 1);
    assert_eq!(mem.delete_all_notes("u1").await.unwrap(), 0);
    assert_eq!(mem.recall("u2", "p", 10).await.unwrap(), ["b1"]);
}

async fn the_cascade_leaves_no_row_or_index_entry_and_keeps_the_counters(f: &Fixture) {
    let mem = &f.store.memory;
    for (p, n) in [
        ("p1", "zebracorn migrations"),
        ("p2", "zebracorn deploys"),
        ("p2", "other words"),
    ] {
        mem.remember(note("u_a", p, n, 1.0)).await.unwrap();
    }
    mem.remember(note("u_b", "p1", "unrelated note of b", 2.0))
        .await
        .unwrap();
    assert_eq!(f.index_rows("zebracorn").await, (4, 0, 2));
    assert_eq!(mem.delete_all_notes("u_a").await.unwrap(), 3);
    assert_eq!(f.rows_of("notes", "u_a").await, 0);
    assert_eq!(
        f.rows_of("note_counters", "u_a").await,
        2,
        "the id counters stay, so no id is reused"
    );
    assert_eq!(f.rows_of("note_counters", "u_b").await, 1);
    assert_eq!(
        f.index_rows("zebracorn").await,
        (1, 0, 0),
        "only B's index entry remains"
    );
    assert_eq!(
        mem.recall("u_b", "p1", 10).await.unwrap(),
        ["unrelated note of b"]
    );
    assert!(mem.delete_note("u_a", "mem#u_a#p1#1").await.unwrap() == 0);
    let next = mem.remember(note("u_a", "p2", "after", 3.0)).await.unwrap();
    assert_eq!(
        next.id, "mem#u_a#p2#3",
        "numbering goes on after the cascade"
    );
}

/// Hand-written notes of a coding project: enough of them that the project does not fit the budget,
/// each about one thing, so a question has a clear best answer.
const CODING_NOTES: &[&str] = &[
    "Run the database migrations with `cargo sqlx migrate run` before starting the server.",
    "We use tokio for async; never block the runtime with std::thread::sleep.",
    "The CI pipeline runs cargo fmt, clippy with -D warnings, then cargo test --workspace.",
    "Frontend lives in web/ and is built with Vite; run npm run dev for hot reload.",
    "Error responses are always {error, message} with a machine code.",
    "Deploy to production by tagging a release; the pipeline builds the Docker image.",
    "Prefer sqlx runtime queries over the query! macros so no DATABASE_URL is needed at build time.",
    "Logging uses tracing; never log tokens or passwords.",
    "The benchmark harness lives in crates/relay-bench and prints p50/p90/p99.",
    "Integration tests need a PostgreSQL server on 127.0.0.1:5432 with trust authentication.",
    "Use rustls, not OpenSSL, for TLS so the build needs no system libraries.",
    "Feature flags are read from the FLAGS environment variable at start-up.",
];

const BUDGET: InjectBudget = InjectBudget {
    max_notes: 8,
    max_chars: 6_000,
};

async fn seed(f: &Fixture, how_many: usize) {
    for (i, n) in CODING_NOTES.iter().enumerate().take(how_many) {
        f.store
            .memory
            .remember(note("u1", "proj", n, 1_000.0 + i as f64))
            .await
            .unwrap();
    }
}

async fn inject(
    f: &Fixture,
    user: &str,
    project: &str,
    q: &str,
    budget: InjectBudget,
) -> Vec<String> {
    f.store
        .memory
        .notes_for_injection(user, project, q, budget)
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.note)
        .collect()
}

async fn edits_keep_the_index_in_step(f: &Fixture) {
    seed(f, CODING_NOTES.len()).await;
    let mem = &f.store.memory;
    let id = "mem#u1#proj#1";
    let edited = mem
        .edit_note(
            "u1",
            id,
            &NoteText::parse("Kubernetes manifests live in deploy/k8s.", "n").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((edited.id.as_str(), edited.created_at), (id, 1_000.0));
    assert!(
        mem.edit_note("u2", id, &NoteText::parse("x", "n").unwrap())
            .await
            .unwrap()
            .is_none(),
        "never another user's"
    );
    let notes = mem
        .notes_for_injection("u1", "proj", "database migrations", BUDGET)
        .await
        .unwrap();
    assert!(
        notes.iter().all(|n| n.id != id),
        "the old text is no longer indexed"
    );
    let notes = mem
        .notes_for_injection("u1", "proj", "kubernetes manifests", BUDGET)
        .await
        .unwrap();
    assert_eq!(notes[0].id, id);
    // The edited text is what dedupe compares against.
    let again = mem
        .remember(note(
            "u1",
            "proj",
            "Kubernetes   manifests live in deploy/k8s.",
            2_000.0,
        ))
        .await
        .unwrap();
    assert_eq!((again.id.as_str(), again.created), (id, false));
    mem.delete_note("u1", id).await.unwrap();
    assert!(
        inject(f, "u1", "proj", "kubernetes manifests", BUDGET)
            .await
            .is_empty()
    );
}

async fn injection_is_whole_ranked_or_nothing(f: &Fixture) {
    // A project that fits the budget goes in whole, oldest first, whatever the question.
    seed(f, 5).await;
    assert_eq!(
        inject(f, "u1", "proj", "anything at all", BUDGET).await,
        CODING_NOTES[..5]
    );
    assert_eq!(inject(f, "u1", "proj", "", BUDGET).await, CODING_NOTES[..5]);

    // A larger project gets what is relevant, best first.
    f.store.memory.delete_project("u1", "proj").await.unwrap();
    seed(f, CODING_NOTES.len()).await;
    let got = inject(
        f,
        "u1",
        "proj",
        "How do I run the database migrations?",
        BUDGET,
    )
    .await;
    assert_eq!(
        got.first().map(String::as_str),
        Some(CODING_NOTES[0]),
        "{got:?}"
    );
    assert!(got.len() < CODING_NOTES.len(), "{got:?}");
    let got = inject(
        f,
        "u1",
        "proj",
        "which TLS library should the build use?",
        BUDGET,
    )
    .await;
    assert_eq!(
        got.first().map(String::as_str),
        Some(CODING_NOTES[10]),
        "{got:?}"
    );
    let got = inject(f, "u1", "proj", "what about logging passwords", BUDGET).await;
    assert_eq!(
        got,
        [CODING_NOTES[7]],
        "one note matches; nothing else clears the floor"
    );
    // Stemming: "migrating" finds "migrations".
    let got = inject(f, "u1", "proj", "migrating", BUDGET).await;
    assert_eq!(got, [CODING_NOTES[0]]);
    // Query syntax in a question is just punctuation: the words still count, the operators do not.
    let got = inject(f, "u1", "proj", "database:* & !migrations", BUDGET).await;
    assert_eq!(
        got.first().map(String::as_str),
        Some(CODING_NOTES[0]),
        "{got:?}"
    );

    // Nonsense, stopwords only, empty, and query syntax of either engine match nothing.
    for q in [
        "florp zindle quaxx",
        "",
        "how is it",
        "\"OR\" AND NOT (*)",
        "a & b | !c <-> 'd':*",
        "') OR 1=1 --",
        "zindle:* & !florp | (quaxx <-> blorb)",
    ] {
        assert!(
            inject(f, "u1", "proj", q, BUDGET).await.is_empty(),
            "{q:?} injected something"
        );
    }

    // Never across users or projects.
    assert!(
        inject(f, "u2", "proj", "database migrations", BUDGET)
            .await
            .is_empty()
    );
    assert!(
        inject(f, "u1", "other", "database migrations", BUDGET)
            .await
            .is_empty()
    );
}

async fn injection_keeps_the_budget(f: &Fixture) {
    seed(f, CODING_NOTES.len()).await;
    let q = "cargo sqlx tokio pipeline tracing rustls postgresql benchmark vite docker flags error";
    let few = InjectBudget {
        max_notes: 3,
        max_chars: 6_000,
    };
    assert_eq!(inject(f, "u1", "proj", q, few).await.len(), 3);
    let short = InjectBudget {
        max_notes: 8,
        max_chars: 150,
    };
    let got = inject(f, "u1", "proj", q, short).await;
    let chars: usize = got.iter().map(|n| n.chars().count()).sum();
    assert!(!got.is_empty() && chars <= 150, "{chars}: {got:?}");
    // Ties go to the newest: two equal notes but for their time.
    let mem = &f.store.memory;
    mem.remember(note("u1", "tie", "quokka habitat", 1.0))
        .await
        .unwrap();
    mem.remember(note("u1", "tie", "habitat quokka", 2.0))
        .await
        .unwrap();
    for i in 0..9 {
        mem.remember(note("u1", "tie", &format!("filler {i}"), 3.0))
            .await
            .unwrap();
    }
    let got = inject(f, "u1", "tie", "quokka", BUDGET).await;
    assert_eq!(got, ["habitat quokka", "quokka habitat"]);
}

async fn open_mode_legs_are_counted(f: &Fixture) {
    let mem = &f.store.memory;
    assert_eq!(mem.open_legs().await.unwrap(), 0);
    for _ in 0..3 {
        mem.count_open_leg().await.unwrap();
    }
    assert_eq!(mem.open_legs().await.unwrap(), 3);
}

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
    assert_eq!(applied, [(1, true), (2, true)]);
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
