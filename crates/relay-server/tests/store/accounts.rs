//! Accounts, sessions, quota admission and the waitlist, on both backends.

use relay_server::domain::Role;
use relay_server::store::{Admission, StoreError, UserChanges};

use crate::{Fixture, new_user, warm_up};

conformance!(
    users_are_created_found_updated_and_deleted,
    a_taken_email_is_a_conflict,
    sessions_expire_and_end_on_delete,
    admission_stops_at_the_limit_and_refunds_give_back,
    concurrent_admission_takes_exactly_what_is_left,
    the_waitlist_is_idempotent,
    a_change_committed_elsewhere_holds_at_the_next_lookup,
    a_seen_session_is_answered_from_the_cache,
);

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
                allowed_models: Some(Some(vec!["small".into(), "large".into()])),
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((changed.role, changed.limit), (Role::Admin, 42));
    let models = Some(vec!["small".to_owned(), "large".to_owned()]);
    assert_eq!(changed.allowed_models, models, "the allowlist, in order");
    let (read, _) = auth
        .user_by_email("ada@example.com")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.allowed_models, models, "read back as stored");
    assert!(read.may_use("large") && !read.may_use("other"));
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
    assert_eq!(kept.allowed_models, models, "the allowlist stays");
    let every = auth
        .update_user(
            "ada@example.com",
            UserChanges {
                allowed_models: Some(None),
                ..UserChanges::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(every.allowed_models, None, "null: every model again");
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

/// A change another process commits (an operator's statement here, `relay users set` or another
/// instance in production) holds at the very next lookup, with the session cached: the cache may
/// not wait for a notification still on its way.
async fn a_change_committed_elsewhere_holds_at_the_next_lookup(f: &Fixture) {
    let auth = &f.store.auth;
    auth.create_user(new_user("u_n", "n@example.com", Role::User, 5, 0.0))
        .await
        .unwrap();
    auth.create_session("hash_n", "u_n", 100.0, 10_000.0)
        .await
        .unwrap();
    for round in 0..40 {
        let role = if round % 2 == 0 { "admin" } else { "user" };
        // Read twice so the second answer can come from the cache.
        for _ in 0..2 {
            auth.session_user("hash_n", 150.0).await.unwrap().unwrap();
        }
        f.execute(&format!(
            "UPDATE users SET role = '{role}' WHERE id = 'u_n'"
        ))
        .await;
        let seen = auth.session_user("hash_n", 150.0).await.unwrap().unwrap();
        assert_eq!(seen.role.as_str(), role, "round {round}");
    }
    f.execute("DELETE FROM sessions WHERE token_hash = 'hash_n'")
        .await;
    assert!(
        auth.session_user("hash_n", 150.0).await.unwrap().is_none(),
        "a session deleted elsewhere ends at once"
    );
}

/// The cache is really used once it can be trusted (on PostgreSQL, once the listener is up and has
/// applied the version a request reads): a session seen before is answered without the store, which
/// no longer has it. Each try uses a new session, until the cache answers or five seconds pass.
async fn a_seen_session_is_answered_from_the_cache(f: &Fixture) {
    let auth = &f.store.auth;
    auth.create_user(new_user("u_c", "c@example.com", Role::User, 5, 0.0))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    for attempt in 0.. {
        let hash = format!("hash_c{attempt}");
        auth.create_session(&hash, "u_c", 100.0, 10_000.0)
            .await
            .unwrap();
        for _ in 0..2 {
            auth.session_user(&hash, 150.0).await.unwrap().unwrap();
        }
        f.delete_session_unannounced(&hash).await;
        if auth.session_user(&hash, 150.0).await.unwrap().is_some() {
            // And the store's own lookups still see the truth.
            assert!(
                auth.session_user_fresh(&hash, 150.0)
                    .await
                    .unwrap()
                    .is_none()
            );
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cache never answered in {attempt} tries"
        );
    }
}
