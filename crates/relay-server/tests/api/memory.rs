//! Project memory over HTTP: every endpoint, every 400 of the contract, isolation, the cascade.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, body, expect_error};

impl TestApp {
    pub async fn remember(
        &self,
        token: Option<&str>,
        project: &str,
        note: &str,
    ) -> reqwest::Response {
        self.post(
            "/v1/memory/remember",
            token,
            &json!({"note": note, "project_id": project}),
        )
        .await
    }

    pub async fn list(&self, token: Option<&str>, query: &str) -> Value {
        let r = self.get(&format!("/v1/memory/list{query}"), token).await;
        assert_eq!(r.status(), StatusCode::OK);
        body(r).await
    }

    pub async fn recall(&self, token: Option<&str>, project: &str) -> Vec<String> {
        let r = self
            .get(&format!("/v1/memory/recall?project_id={project}"), token)
            .await;
        assert_eq!(r.status(), StatusCode::OK);
        serde_json::from_value(body(r).await["notes"].clone()).unwrap()
    }

    pub async fn delete(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        let mut req = self.client.delete(self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }

    pub async fn patch(&self, path: &str, token: Option<&str>, b: &Value) -> reqwest::Response {
        let mut req = self.client.patch(self.url(path)).json(b);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }
}

fn ids(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

fn encoded(id: &str) -> String {
    id.replace('#', "%23")
}

#[tokio::test]
async fn remember_stores_a_note_with_the_contract_fields() {
    let app = TestApp::open().await;
    let before = relay_server::clock::now();
    let r = app
        .post(
            "/v1/memory/remember",
            None,
            &json!({"note": "  Use sqlx, not diesel.  ", "project_id": "p1", "author": "agent", "mem_type": "decision"}),
        )
        .await;
    assert_eq!(body(r).await, json!({"ok": true, "id": "mem#local#p1#1"}));
    let list = app.list(None, "?project_id=p1").await;
    assert_eq!(list["total"], 1);
    let note = &list["items"][0];
    assert_eq!(note["id"], "mem#local#p1#1");
    assert_eq!(note["project_id"], "p1");
    assert_eq!(note["note"], "Use sqlx, not diesel.");
    assert_eq!(note["author"], "agent");
    assert_eq!(note["mem_type"], "decision");
    assert_eq!(note["pinned"], false);
    let created = note["created_at"].as_f64().unwrap();
    assert!(
        created >= before - 1.0 && created <= relay_server::clock::now() + 1.0,
        "seconds, not ms: {created}"
    );

    app.remember(None, "p1", "second").await;
    let second = &app.list(None, "?project_id=p1").await["items"][1];
    assert_eq!(
        (second["author"].as_str(), second["mem_type"].as_str()),
        (Some("user"), Some("note"))
    );
}

#[tokio::test]
async fn note_ids_count_per_project_from_one_and_are_never_reused() {
    let app = TestApp::open().await;
    for n in ["a", "b", "c"] {
        app.remember(None, "p1", n).await;
    }
    app.remember(None, "p2", "other project").await;
    assert_eq!(
        ids(&app.list(None, "?project_id=p1").await),
        ["mem#local#p1#1", "mem#local#p1#2", "mem#local#p1#3"]
    );
    assert_eq!(
        ids(&app.list(None, "?project_id=p2").await),
        ["mem#local#p2#1"]
    );
    // Delete the newest and the whole project: numbering still goes on.
    let r = app
        .delete(&format!("/v1/memory/{}", encoded("mem#local#p1#3")), None)
        .await;
    assert_eq!(body(r).await, json!({"ok": true, "deleted": 1}));
    app.remember(None, "p1", "d").await;
    assert_eq!(
        ids(&app.list(None, "?project_id=p1").await).last().unwrap(),
        "mem#local#p1#4"
    );
    app.delete("/v1/memory/all?project_id=p1", None).await;
    app.remember(None, "p1", "e").await;
    assert_eq!(
        ids(&app.list(None, "?project_id=p1").await),
        ["mem#local#p1#5"]
    );
    // Nor after the GDPR cascade, in either form: every note goes, the numbering does not restart.
    let r = app.delete("/v1/memory/all", None).await;
    assert_eq!(body(r).await, json!({"ok": true, "deleted": 2}));
    app.remember(None, "p1", "f").await;
    app.remember(None, "p2", "g").await;
    assert_eq!(
        ids(&app.list(None, "").await),
        ["mem#local#p1#6", "mem#local#p2#2"]
    );
    let r = app
        .post("/v1/memory/delete", None, &json!({"all": true}))
        .await;
    assert_eq!(body(r).await, json!({"ok": true, "deleted": 2}));
    app.remember(None, "p1", "h").await;
    assert_eq!(ids(&app.list(None, "").await), ["mem#local#p1#7"]);
}

#[tokio::test]
async fn fifty_concurrent_remembers_get_ids_one_to_fifty() {
    let app = TestApp::open().await;
    let mut tasks = Vec::new();
    for i in 0..50 {
        let client = app.client.clone();
        let url = app.url("/v1/memory/remember");
        tasks.push(tokio::spawn(async move {
            client
                .post(url)
                .json(&json!({"note": format!("note {i}"), "project_id": "race"}))
                .send()
                .await
                .unwrap()
                .status()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
    let list = app.list(None, "?project_id=race&limit=200").await;
    let mut seqs: Vec<u32> = ids(&list)
        .iter()
        .map(|id| id.rsplit('#').next().unwrap().parse().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=50).collect::<Vec<_>>());
}

#[tokio::test]
async fn exact_duplicates_are_folded() {
    let app = TestApp::open().await;
    assert_eq!(
        body(app.remember(None, "p", "run  cargo\ttest").await).await,
        json!({"ok": true, "id": "mem#local#p#1"})
    );
    // The folded duplicate answers the note that was already there.
    assert_eq!(
        body(app.remember(None, "p", " run cargo test ").await).await,
        json!({"ok": true, "id": "mem#local#p#1"})
    );
    app.remember(None, "other", "run cargo test").await;
    assert_eq!(app.list(None, "?project_id=p").await["total"], 1);
    assert_eq!(app.list(None, "?project_id=other").await["total"], 1);
    app.remember(None, "p", "run cargo test --release").await;
    assert_eq!(app.list(None, "?project_id=p").await["total"], 2);
}

#[tokio::test]
async fn project_alias_is_accepted_wherever_project_id_is() {
    let app = TestApp::open().await;
    app.post(
        "/v1/memory/remember",
        None,
        &json!({"note": "via alias", "project": "legacy"}),
    )
    .await;
    assert_eq!(app.recall(None, "legacy").await, ["via alias"]);
    let r = app.get("/v1/memory/recall?project=legacy", None).await;
    assert_eq!(body(r).await["notes"], json!(["via alias"]));
    let r = app
        .post("/v1/memory/recall", None, &json!({"project": "legacy"}))
        .await;
    assert_eq!(body(r).await["notes"], json!(["via alias"]));
    assert_eq!(app.list(None, "?project=legacy").await["total"], 1);
    let r = app
        .post("/v1/memory/delete", None, &json!({"project": "legacy"}))
        .await;
    assert_eq!(body(r).await["deleted"], 1);
    app.remember(None, "legacy", "again").await;
    let r = app.delete("/v1/memory/all?project=legacy", None).await;
    assert_eq!(body(r).await["deleted"], 1);
}

#[tokio::test]
async fn project_id_and_alias_that_differ_are_400() {
    let app = TestApp::open().await;
    let r = app
        .post(
            "/v1/memory/remember",
            None,
            &json!({"note": "x", "project_id": "a", "project": "b"}),
        )
        .await;
    expect_error(r, 400, "invalid_request").await;
    expect_error(
        app.get("/v1/memory/list?project_id=a&project=b", None)
            .await,
        400,
        "invalid_request",
    )
    .await;
    // The same value twice is fine.
    let r = app
        .post(
            "/v1/memory/remember",
            None,
            &json!({"note": "x", "project_id": "a", "project": "a"}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn recall_get_and_post_agree_oldest_first() {
    let app = TestApp::open().await;
    for n in ["first", "second", "third"] {
        app.remember(None, "p", n).await;
    }
    let get = app.recall(None, "p").await;
    let post = body(
        app.post("/v1/memory/recall", None, &json!({"project_id": "p"}))
            .await,
    )
    .await;
    assert_eq!(get, ["first", "second", "third"]);
    assert_eq!(post, json!({"notes": ["first", "second", "third"]}));
    assert!(app.recall(None, "empty").await.is_empty());
}

#[tokio::test]
async fn recall_returns_the_newest_notes_up_to_the_configured_limit() {
    let app = TestApp::spawn_with(|dir| {
        let mut c = crate::helpers::open_config(dir);
        c.memory.recall_limit = 3;
        c
    })
    .await;
    for n in 1..=5 {
        app.remember(None, "p", &format!("n{n}")).await;
    }
    assert_eq!(app.recall(None, "p").await, ["n3", "n4", "n5"]);
}

#[tokio::test]
async fn recall_without_a_project_is_400() {
    let app = TestApp::open().await;
    expect_error(
        app.get("/v1/memory/recall", None).await,
        400,
        "invalid_request",
    )
    .await;
    expect_error(
        app.post("/v1/memory/recall", None, &json!({})).await,
        400,
        "invalid_request",
    )
    .await;
}

#[tokio::test]
async fn list_pages_clamps_and_refuses_negative_values() {
    let app = TestApp::open().await;
    for i in 0..5 {
        app.remember(
            None,
            if i % 2 == 0 { "even" } else { "odd" },
            &format!("n{i}"),
        )
        .await;
    }
    let all = app.list(None, "").await;
    assert_eq!(
        all["total"], 5,
        "without project_id: every project of the caller"
    );
    // Oldest first, ties (notes remembered in the same millisecond) by id, as the contract says.
    let listed: Vec<(f64, String, String)> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["created_at"].as_f64().unwrap(),
                n["id"].as_str().unwrap().to_owned(),
                n["note"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut expected = listed.clone();
    expected.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    assert_eq!(listed, expected, "oldest first, ties by id");
    let mut seen: Vec<&str> = listed.iter().map(|n| n.2.as_str()).collect();
    seen.sort_unstable();
    assert_eq!(seen, ["n0", "n1", "n2", "n3", "n4"]);
    let page = app.list(None, "?limit=2&offset=1").await;
    assert_eq!(page["total"], 5);
    let notes: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["note"].as_str().unwrap())
        .collect();
    assert_eq!(notes, [listed[1].2.as_str(), listed[2].2.as_str()]);
    assert_eq!(
        app.list(None, "?limit=100000").await["items"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    let b = expect_error(
        app.get("/v1/memory/list?limit=-1", None).await,
        400,
        "invalid_request",
    )
    .await;
    assert!(b["message"].as_str().unwrap().contains("limit"));
    expect_error(
        app.get("/v1/memory/list?offset=-3", None).await,
        400,
        "invalid_request",
    )
    .await;
    let b = expect_error(
        app.get("/v1/memory/list?limit=ten", None).await,
        400,
        "invalid_request",
    )
    .await;
    assert!(b["message"].as_str().unwrap().contains("limit"), "{b}");
}

#[tokio::test]
async fn list_limit_above_200_is_clamped_to_200() {
    let app = TestApp::open().await;
    let mut tasks = Vec::new();
    for i in 0..205 {
        let (client, url) = (app.client.clone(), app.url("/v1/memory/remember"));
        tasks.push(tokio::spawn(async move {
            client
                .post(url)
                .json(&json!({"note": format!("n{i}"), "project_id": "big"}))
                .send()
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let page = app.list(None, "?project_id=big&limit=500").await;
    assert_eq!(page["total"], 205);
    assert_eq!(page["items"].as_array().unwrap().len(), 200);
    assert_eq!(
        app.list(None, "?project_id=big").await["items"]
            .as_array()
            .unwrap()
            .len(),
        50
    );
}

#[tokio::test]
async fn remember_refuses_every_invalid_body_with_400() {
    let app = TestApp::open().await;
    let cases: Vec<(&str, Value, &str)> = vec![
        ("missing note", json!({"project_id": "p"}), "note"),
        (
            "note of the wrong type",
            json!({"note": 5, "project_id": "p"}),
            "note",
        ),
        ("empty note", json!({"note": "", "project_id": "p"}), "note"),
        (
            "blank note",
            json!({"note": " \n\t", "project_id": "p"}),
            "note",
        ),
        (
            "note over 16 KiB",
            json!({"note": "x".repeat(16 * 1024 + 1), "project_id": "p"}),
            "16 KiB",
        ),
        (
            "bad mem_type",
            json!({"note": "n", "project_id": "p", "mem_type": "secret"}),
            "mem_type",
        ),
        (
            "mem_type of the wrong type",
            json!({"note": "n", "project_id": "p", "mem_type": 1}),
            "mem_type",
        ),
        (
            "author too long",
            json!({"note": "n", "project_id": "p", "author": "a".repeat(65)}),
            "author",
        ),
        ("missing project", json!({"note": "n"}), "project_id"),
        (
            "bad project id",
            json!({"note": "n", "project_id": "a b/c"}),
            "project_id",
        ),
        (
            "project id too long",
            json!({"note": "n", "project_id": "p".repeat(129)}),
            "project_id",
        ),
    ];
    for (rule, b, mentions) in cases {
        let r = app.post("/v1/memory/remember", None, &b).await;
        let err = expect_error(r, 400, "invalid_request").await;
        assert!(
            err["message"].as_str().unwrap().contains(mentions),
            "{rule}: {err}"
        );
    }
    let err = expect_error(
        app.post_raw("/v1/memory/remember", "note=hello").await,
        400,
        "invalid_request",
    )
    .await;
    assert!(
        err["message"].as_str().unwrap().contains("JSON"),
        "non-JSON: {err}"
    );
    assert_eq!(app.list(None, "").await["total"], 0, "nothing was stored");
    // Exactly 16 KiB is allowed.
    let r = app.remember(None, "p", &"y".repeat(16 * 1024)).await;
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn delete_selectors_follow_priority_id_then_project_then_all() {
    let app = TestApp::open().await;
    for (p, n) in [("p1", "a"), ("p1", "b"), ("p2", "c")] {
        app.remember(None, p, n).await;
    }
    // id wins over project_id and all.
    let r = app
        .post(
            "/v1/memory/delete",
            None,
            &json!({"id": "mem#local#p1#1", "project_id": "p2", "all": true}),
        )
        .await;
    assert_eq!(body(r).await, json!({"ok": true, "deleted": 1}));
    assert_eq!(app.list(None, "").await["total"], 2);
    // project_id wins over all.
    let r = app
        .post(
            "/v1/memory/delete",
            None,
            &json!({"project_id": "p1", "all": true}),
        )
        .await;
    assert_eq!(body(r).await, json!({"ok": true, "deleted": 1}));
    assert_eq!(ids(&app.list(None, "").await), ["mem#local#p2#1"]);
    let r = app
        .post("/v1/memory/delete", None, &json!({"all": true}))
        .await;
    assert_eq!(body(r).await, json!({"ok": true, "deleted": 1}));
    let r = app
        .post("/v1/memory/delete", None, &json!({"id": "mem#local#p2#1"}))
        .await;
    assert_eq!(body(r).await, json!({"ok": true, "deleted": 0}));
}

#[tokio::test]
async fn delete_without_a_usable_selector_is_400() {
    let app = TestApp::open().await;
    app.remember(None, "p", "keep me").await;
    for b in [
        json!({}),
        json!({"all": false}),
        json!({"id": 5}),
        json!({"all": "yes"}),
        json!({"project_id": 7}),
    ] {
        expect_error(
            app.post("/v1/memory/delete", None, &b).await,
            400,
            "invalid_request",
        )
        .await;
    }
    expect_error(
        app.post_raw("/v1/memory/delete", "all").await,
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(app.list(None, "").await["total"], 1, "nothing was deleted");
}

#[tokio::test]
async fn delete_by_path_id_takes_the_percent_encoded_id() {
    let app = TestApp::open().await;
    app.remember(None, "p1", "a").await;
    let path = format!("/v1/memory/{}", encoded("mem#local#p1#1"));
    assert_eq!(
        body(app.delete(&path, None).await).await,
        json!({"ok": true, "deleted": 1})
    );
    assert_eq!(
        body(app.delete(&path, None).await).await,
        json!({"ok": true, "deleted": 0})
    );
}

#[tokio::test]
async fn delete_all_with_a_project_keeps_the_other_projects() {
    let app = TestApp::open().await;
    app.remember(None, "p1", "a").await;
    app.remember(None, "p1", "b").await;
    app.remember(None, "p2", "c").await;
    assert_eq!(
        body(app.delete("/v1/memory/all?project_id=p1", None).await).await,
        json!({"ok": true, "deleted": 2})
    );
    assert_eq!(ids(&app.list(None, "").await), ["mem#local#p2#1"]);
    assert_eq!(
        body(app.delete("/v1/memory/all", None).await).await,
        json!({"ok": true, "deleted": 1})
    );
    assert_eq!(app.list(None, "").await["total"], 0);
}

#[tokio::test]
async fn patch_edits_content_ignores_pinned_and_404s_unknown_ids() {
    let app = TestApp::open().await;
    app.remember(None, "p", "old text").await;
    let path = format!("/v1/memory/{}", encoded("mem#local#p#1"));
    let r = app
        .patch(
            &path,
            None,
            &json!({"content": "  new text ", "pinned": true}),
        )
        .await;
    let b = body(r).await;
    assert_eq!(b["ok"], true);
    assert_eq!(b["item"]["note"], "new text");
    assert_eq!(b["item"]["pinned"], false);
    assert_eq!(b["item"]["id"], "mem#local#p#1");
    assert_eq!(app.recall(None, "p").await, ["new text"]);
    let r = app.patch(&path, None, &json!({"pinned": true})).await;
    assert_eq!(body(r).await["item"]["note"], "new text");
    expect_error(
        app.patch(&path, None, &json!({"content": "  "})).await,
        400,
        "invalid_request",
    )
    .await;
    expect_error(
        app.patch(&path, None, &json!({"content": 3})).await,
        400,
        "invalid_request",
    )
    .await;
    let missing = format!("/v1/memory/{}", encoded("mem#local#p#99"));
    expect_error(
        app.patch(&missing, None, &json!({"content": "x"})).await,
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn memory_needs_a_token_when_auth_is_on() {
    let app = TestApp::with_auth().await;
    expect_error(app.remember(None, "p", "x").await, 401, "unauthorized").await;
    expect_error(app.get("/v1/memory/list", None).await, 401, "unauthorized").await;
    expect_error(
        app.get("/v1/memory/recall?project_id=p", Some("rly_bad"))
            .await,
        401,
        "unauthorized",
    )
    .await;
}

#[tokio::test]
async fn another_users_notes_are_invisible_and_untouchable() {
    let app = TestApp::with_auth().await;
    let a = app.user("a@example.com").await;
    let b = app.user("b@example.com").await;
    app.remember(Some(&a), "shared", "secret of A").await;
    let a_id = app.list(Some(&a), "").await["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let a_user = a_id.split('#').nth(1).unwrap().to_owned();

    // Listing, recalling, by project, by alias, or naming A in a user_id field shows B nothing.
    assert_eq!(app.list(Some(&b), "").await["total"], 0);
    assert_eq!(
        app.list(Some(&b), &format!("?project_id=shared&user_id={a_user}"))
            .await["total"],
        0
    );
    assert_eq!(app.list(Some(&b), "?project=shared").await["total"], 0);
    assert!(app.recall(Some(&b), "shared").await.is_empty());
    let r = app
        .post(
            "/v1/memory/recall",
            Some(&b),
            &json!({"project_id": "shared", "user_id": a_user}),
        )
        .await;
    assert_eq!(body(r).await["notes"], json!([]));
    // B's own note goes under B, whatever user_id B claims.
    let r = app
        .post(
            "/v1/memory/remember",
            Some(&b),
            &json!({"note": "B's", "project_id": "shared", "user_id": a_user}),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(app.recall(Some(&a), "shared").await, ["secret of A"]);

    // Editing or deleting A's note by id answers like a missing note.
    let path = format!("/v1/memory/{}", encoded(&a_id));
    let missing = format!("/v1/memory/{}", encoded(&format!("mem#{a_user}#shared#99")));
    let edit_a = expect_error(
        app.patch(&path, Some(&b), &json!({"content": "hacked"}))
            .await,
        404,
        "not_found",
    )
    .await;
    let edit_missing = expect_error(
        app.patch(&missing, Some(&b), &json!({"content": "x"}))
            .await,
        404,
        "not_found",
    )
    .await;
    assert_eq!(edit_a, edit_missing);
    assert_eq!(
        body(app.delete(&path, Some(&b)).await).await,
        json!({"ok": true, "deleted": 0})
    );
    let r = app
        .post("/v1/memory/delete", Some(&b), &json!({"id": a_id}))
        .await;
    assert_eq!(body(r).await["deleted"], 0);
    let r = app
        .post("/v1/memory/delete", Some(&b), &json!({"project": "shared"}))
        .await;
    assert_eq!(
        body(r).await["deleted"],
        1,
        "only B's own note in that project"
    );
    assert_eq!(app.recall(Some(&a), "shared").await, ["secret of A"]);

    // A's cascade leaves B untouched.
    app.remember(Some(&b), "mine", "B keeps this").await;
    let r = app
        .post("/v1/memory/delete", Some(&a), &json!({"all": true}))
        .await;
    assert_eq!(body(r).await["deleted"], 1);
    assert_eq!(app.recall(Some(&b), "mine").await, ["B keeps this"]);
}

#[tokio::test]
async fn the_cascade_leaves_no_note_or_index_row_of_the_caller() {
    let app = TestApp::with_auth().await;
    let a = app.user("a@example.com").await;
    let b = app.user("b@example.com").await;
    for (p, n) in [
        ("p1", "zebracorn migrations"),
        ("p2", "zebracorn deploys"),
        ("p2", "other words"),
    ] {
        app.remember(Some(&a), p, n).await;
    }
    app.remember(Some(&b), "p1", "unrelated note of b").await;
    let a_user = app.list(Some(&a), "").await["items"][0]["id"]
        .as_str()
        .unwrap()
        .split('#')
        .nth(1)
        .unwrap()
        .to_owned();
    let r = app.delete("/v1/memory/all", Some(&a)).await;
    assert_eq!(body(r).await, json!({"ok": true, "deleted": 3}));

    if crate::helpers::on_postgres() {
        // The search vector is a column of `notes` (no separate index table), so no note row of
        // the caller means nothing derived from their notes is left.
        let pool = app.pg_pool().await;
        for table in ["notes", "note_counters"] {
            let n: i64 = sqlx::query_scalar(match table {
                "notes" => "SELECT count(*) FROM notes WHERE user_id = $1",
                _ => "SELECT count(*) FROM note_counters WHERE user_id = $1",
            })
            .bind(&a_user)
            .fetch_one(&pool)
            .await
            .unwrap();
            // The id counters stay (no note text in them), so no id is ever reused.
            let kept = if table == "notes" { 0 } else { 2 };
            assert_eq!(n, kept, "{table} rows of the caller");
        }
        let (rows, hits): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE search @@ to_tsquery('english', 'zebracorn'))
             FROM notes",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(
            (rows, hits),
            (1, 0),
            "only B's note (and its vector) remains"
        );
        assert_eq!(app.me(Some(&a)).await.status(), StatusCode::OK);
        assert_eq!(app.recall(Some(&b), "p1").await, ["unrelated note of b"]);
        return;
    }
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        app.dir.path().join("relay.db").display()
    ))
    .await
    .unwrap();
    for table in ["notes", "note_counters"] {
        let n: i64 = sqlx::query_scalar(match table {
            "notes" => "SELECT count(*) FROM notes WHERE user_id = ?",
            _ => "SELECT count(*) FROM note_counters WHERE user_id = ?",
        })
        .bind(&a_user)
        .fetch_one(&pool)
        .await
        .unwrap();
        // The id counters stay (no note text in them), so no id is ever reused.
        let kept = if table == "notes" { 0 } else { 2 };
        assert_eq!(n, kept, "{table} rows of the caller");
    }
    let fts_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM notes_fts")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(fts_rows, 1, "only B's index row remains");
    let hits: i64 =
        sqlx::query_scalar("SELECT count(*) FROM notes_fts WHERE notes_fts MATCH 'zebracorn'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(hits, 0);
    let leftovers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM notes_fts WHERE rowid NOT IN (SELECT pk FROM notes)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(leftovers, 0);
    // The account itself stays.
    assert_eq!(app.me(Some(&a)).await.status(), StatusCode::OK);
    assert_eq!(app.recall(Some(&b), "p1").await, ["unrelated note of b"]);
}

#[tokio::test]
async fn a_nul_character_in_a_note_is_never_a_server_error() {
    let app = TestApp::open().await;
    for body in [
        json!({"project_id": "p", "note": "before\u{0}after"}),
        json!({"project_id": "p", "note": "fine", "author": "a\u{0}b"}),
    ] {
        let r = app.post("/v1/memory/remember", None, &body).await;
        if crate::helpers::on_postgres() {
            // PostgreSQL cannot hold a NUL in text: the request's fault, not the server's.
            expect_error(r, 400, "invalid_request").await;
        } else {
            assert!(
                r.status().is_success() || r.status() == 400,
                "{}",
                r.status()
            );
        }
    }
    let r = app.remember(None, "p", "plain").await;
    assert_eq!(r.status(), StatusCode::OK, "the store still works");
}
