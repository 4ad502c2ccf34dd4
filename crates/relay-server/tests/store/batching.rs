//! Group commit of the leg's writes, on both backends: many concurrent admissions, refunds and
//! open-mode counts go to the store in batches, and each caller still gets exactly its own answer —
//! the quota exact for one user with many legs, for many users at once, and across two stores
//! (instances) sharing one database; a failed batch fails each of its callers alike.

use std::collections::HashMap;
use std::sync::Arc;

use relay_server::domain::{Email, Role};
use relay_server::store::{Admission, AuthStore, Backend, NewUser, Opener, StoreError};

use crate::{OPTIONS, pg};

/// Two stores opened separately on one database (two instances), and what keeps it alive.
pub(crate) struct Instances {
    pub(crate) one: Backend,
    pub(crate) two: Backend,
    url: String,
    _dir: Option<tempfile::TempDir>,
    _db: Option<pg::TestDb>,
}

impl Instances {
    pub(crate) async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("relay.db").display());
        Self::on(url, Some(dir), None).await
    }

    pub(crate) async fn postgres() -> Self {
        let db = pg::TestDb::create().await;
        Self::on(db.url.clone(), None, Some(db)).await
    }

    async fn on(url: String, dir: Option<tempfile::TempDir>, db: Option<pg::TestDb>) -> Self {
        let open = || async {
            Opener::default()
                .open(&url, "memory.url", &OPTIONS)
                .await
                .unwrap()
        };
        let one = open().await;
        let two = open().await;
        Self {
            one,
            two,
            url,
            _dir: dir,
            _db: db,
        }
    }

    async fn user(&self, id: &str, role: Role, limit: i64) {
        self.one
            .auth
            .create_user(NewUser {
                id: id.to_owned(),
                email: Email::parse(&format!("{id}@example.com")).unwrap(),
                password_hash: "x".into(),
                role,
                limit,
                created_at: 0.0,
            })
            .await
            .unwrap();
    }

    async fn used(&self, id: &str) -> i64 {
        let (user, _) = self
            .one
            .auth
            .user_by_email(&format!("{id}@example.com"))
            .await
            .unwrap()
            .unwrap();
        user.used
    }

    /// Runs a statement on the database directly, beside the stores.
    async fn execute(&self, sql: &'static str) {
        if self.url.starts_with("sqlite") {
            let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
            sqlx::query(sql).execute(&pool).await.unwrap();
            pool.close().await;
        } else {
            let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
            sqlx::query(sql).execute(&pool).await.unwrap();
            pool.close().await;
        }
    }
}

macro_rules! both_instances {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    super::$scenario(&super::Instances::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    super::$scenario(&super::Instances::postgres().await).await;
                }
            )*
        }
    };
}

both_instances!(
    many_legs_of_one_user_take_exactly_what_is_left,
    many_users_at_once_each_get_exactly_their_quota,
    two_instances_share_one_quota_exactly,
    concurrent_refunds_give_back_each_unit_once,
    concurrent_open_mode_legs_are_each_counted,
    a_failed_batch_fails_each_caller_alike_and_the_next_batch_works,
    admissions_wait_for_a_write_lock_held_elsewhere,
);

/// Admits `legs` legs of each of `users`, all at once, spread over the stores given; the
/// admitted count per user.
async fn admit_all(
    stores: &[Arc<dyn AuthStore>],
    users: &[&str],
    legs: usize,
) -> HashMap<String, usize> {
    let mut calls = Vec::new();
    for leg in 0..legs {
        for (i, user) in users.iter().enumerate() {
            let auth = stores[(leg + i) % stores.len()].clone();
            let user = (*user).to_owned();
            calls.push(tokio::spawn(async move {
                let admitted = auth.admit_leg(&user).await.unwrap() == Admission::Admitted;
                (user, admitted)
            }));
        }
    }
    let mut admitted = HashMap::new();
    for call in calls {
        let (user, ok) = call.await.unwrap();
        *admitted.entry(user).or_insert(0) += usize::from(ok);
    }
    admitted
}

async fn many_legs_of_one_user_take_exactly_what_is_left(f: &Instances) {
    f.user("solo", Role::User, 50).await;
    let stores = [f.one.auth.clone()];
    let admitted = admit_all(&stores, &["solo"], 300).await;
    assert_eq!(admitted["solo"], 50, "300 concurrent legs, 50 units");
    assert_eq!(f.used("solo").await, 50);

    // The last unit, asked for by two legs in one breath: exactly one gets it.
    f.user("last", Role::User, 1).await;
    let admitted = admit_all(&stores, &["last"], 2).await;
    assert_eq!(admitted["last"], 1);
    assert_eq!(f.used("last").await, 1);
}

async fn many_users_at_once_each_get_exactly_their_quota(f: &Instances) {
    let mut users = Vec::new();
    for i in 0..30 {
        users.push(format!("user{i:02}"));
    }
    for (i, u) in users.iter().enumerate() {
        f.user(u, Role::User, i64::try_from(i % 7).unwrap()).await;
    }
    f.user("admin", Role::Admin, 0).await;
    f.user("unlimited", Role::User, -1).await;
    let mut names: Vec<&str> = users.iter().map(String::as_str).collect();
    names.extend(["admin", "unlimited", "ghost"]);
    let admitted = admit_all(std::slice::from_ref(&f.one.auth), &names, 8).await;
    for (i, u) in users.iter().enumerate() {
        assert_eq!(admitted[u.as_str()], i % 7, "{u} has {} units", i % 7);
        assert_eq!(f.used(u).await, i64::try_from(i % 7).unwrap(), "{u}");
    }
    assert_eq!(admitted["admin"], 8, "admins are unlimited");
    assert_eq!(admitted["unlimited"], 8, "limit -1 is unlimited");
    assert_eq!(admitted["ghost"], 0, "no account, no unit");
}

async fn two_instances_share_one_quota_exactly(f: &Instances) {
    f.user("shared", Role::User, 40).await;
    f.user("other", Role::User, 3).await;
    let stores = [f.one.auth.clone(), f.two.auth.clone()];
    let admitted = admit_all(&stores, &["shared", "other"], 120).await;
    assert_eq!(admitted["shared"], 40);
    assert_eq!(admitted["other"], 3);
    assert_eq!(f.used("shared").await, 40);
    assert_eq!(f.used("other").await, 3);
}

async fn concurrent_refunds_give_back_each_unit_once(f: &Instances) {
    f.user("r", Role::User, 30).await;
    let admitted = admit_all(std::slice::from_ref(&f.one.auth), &["r"], 30).await;
    assert_eq!(admitted["r"], 30);
    let refunds: Vec<_> = (0..20)
        .map(|i| {
            let auth = if i % 2 == 0 { &f.one } else { &f.two }.auth.clone();
            tokio::spawn(async move { auth.refund_leg("r").await.unwrap() })
        })
        .collect();
    for r in refunds {
        r.await.unwrap();
    }
    assert_eq!(f.used("r").await, 10, "20 refunds of 30 units");
    let refunds: Vec<_> = (0..25)
        .map(|_| {
            let auth = f.one.auth.clone();
            tokio::spawn(async move { auth.refund_leg("r").await.unwrap() })
        })
        .collect();
    for r in refunds {
        r.await.unwrap();
    }
    assert_eq!(f.used("r").await, 0, "never below zero");
    let admitted = admit_all(std::slice::from_ref(&f.two.auth), &["r"], 35).await;
    assert_eq!(
        admitted["r"], 30,
        "every unit given back can be taken again"
    );
}

async fn concurrent_open_mode_legs_are_each_counted(f: &Instances) {
    let before = f.one.memory.open_legs().await.unwrap();
    let counts: Vec<_> = (0..150)
        .map(|i| {
            let memory = if i % 3 == 0 { &f.two } else { &f.one }.memory.clone();
            tokio::spawn(async move { memory.count_open_leg().await.unwrap() })
        })
        .collect();
    for c in counts {
        c.await.unwrap();
    }
    assert_eq!(f.one.memory.open_legs().await.unwrap(), before + 150);
}

async fn a_failed_batch_fails_each_caller_alike_and_the_next_batch_works(f: &Instances) {
    f.user("f", Role::User, 100).await;
    f.execute("ALTER TABLE users RENAME TO users_away").await;
    let calls: Vec<_> = (0..40)
        .map(|_| {
            let auth = f.one.auth.clone();
            tokio::spawn(async move { auth.admit_leg("f").await })
        })
        .collect();
    let mut kinds = Vec::new();
    for c in calls {
        match c.await.unwrap() {
            Err(e) => kinds.push(std::mem::discriminant(&e)),
            Ok(a) => panic!("admitted without a users table: {a:?}"),
        }
    }
    // The kind an unbatched statement gets for the same fault.
    let lone = f.one.auth.user_by_email("f@example.com").await.unwrap_err();
    assert_eq!(kinds.len(), 40);
    assert!(
        kinds.iter().all(|k| *k == std::mem::discriminant(&lone)),
        "each caller gets the kind of error a lone statement gets ({lone:?})"
    );
    let refund = f.one.auth.refund_leg("f").await.unwrap_err();
    assert_eq!(
        std::mem::discriminant(&refund),
        std::mem::discriminant(&lone)
    );
    assert!(!matches!(lone, StoreError::Conflict(_)));
    f.execute("ALTER TABLE users_away RENAME TO users").await;
    let admitted = admit_all(std::slice::from_ref(&f.one.auth), &["f"], 30).await;
    assert_eq!(admitted["f"], 30, "the batches after a failure work");
    assert_eq!(f.used("f").await, 30);
}

async fn admissions_wait_for_a_write_lock_held_elsewhere(f: &Instances) {
    f.user("w", Role::User, 10).await;
    // Another process holds the lock admissions need (SQLite: the database's write lock, which
    // the inline quota connection never waits for; PostgreSQL: the user's row) while 12 legs ask.
    let (sqlite, pg);
    if f.url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(&f.url).await.unwrap();
        let mut conn = pool.acquire().await.unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut *conn)
            .await
            .unwrap();
        (sqlite, pg) = (Some((pool, conn)), None);
    } else {
        let pool = sqlx::PgPool::connect(&f.url).await.unwrap();
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("SELECT 1 FROM users WHERE id = 'w' FOR UPDATE")
            .execute(&mut *tx)
            .await
            .unwrap();
        (sqlite, pg) = (None, Some(tx));
    }
    let legs: Vec<_> = (0..12)
        .map(|_| {
            let auth = f.one.auth.clone();
            tokio::spawn(async move { auth.admit_leg("w").await })
        })
        .collect();
    // While the lock is held no leg may finish, neither admitted nor failed: a connection that
    // gave up on the lock would answer at once.
    let mut legs = legs;
    let first = tokio::time::timeout(std::time::Duration::from_millis(300), &mut legs[0]).await;
    assert!(
        first.is_err(),
        "a leg finished while the lock was held: {first:?}"
    );
    assert!(legs.iter().all(|l| !l.is_finished()));
    if let Some((pool, mut conn)) = sqlite {
        sqlx::query("COMMIT").execute(&mut *conn).await.unwrap();
        drop(conn);
        pool.close().await;
    }
    if let Some(tx) = pg {
        tx.commit().await.unwrap();
    }
    let mut admitted = 0;
    for l in legs {
        match l.await.unwrap() {
            Ok(Admission::Admitted) => admitted += 1,
            Ok(Admission::QuotaExceeded) => {}
            Err(e) => panic!("a leg failed instead of waiting for the lock: {e:?}"),
        }
    }
    assert_eq!(
        admitted, 10,
        "exactly the quota, after the lock was released"
    );
    assert_eq!(f.used("w").await, 10);
}
