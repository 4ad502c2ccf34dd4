//! `GET /v1/models` paged in Anthropic's shape (`limit`, `after_id`, `before_id`; OpenAI's list
//! has no paging) and `GET /v1/models/{model_id}` in the caller's API shape (issue 38).

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent::auth_app;
use crate::fake_upstream::FakeUpstream;
use crate::helpers::body;

fn ids(b: &Value) -> Vec<&str> {
    b["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect()
}

/// `(has_more, first_id, last_id)` of an Anthropic page.
fn bounds(b: &Value) -> (bool, Value, Value) {
    (
        b["has_more"].as_bool().unwrap(),
        b["first_id"].clone(),
        b["last_id"].clone(),
    )
}

#[tokio::test]
async fn the_anthropic_list_pages_and_a_model_answers_by_id_in_the_callers_shape() {
    let fake = FakeUpstream::start().await;
    let app = auth_app(&fake, 5).await;
    let token = app.user("cc@example.com").await;
    let get = |path: &str, anthropic: bool| {
        let mut r = app.client.get(app.url(path)).header("x-api-key", &token);
        if anthropic {
            r = r.header("anthropic-version", "2023-06-01");
        }
        r.send()
    };
    // The list is auto, m1, m2.
    let b = body(get("/v1/models?limit=2", true).await.unwrap()).await;
    assert_eq!(ids(&b), ["auto", "m1"]);
    assert_eq!(bounds(&b), (true, json!("auto"), json!("m1")));
    let b = body(get("/v1/models?limit=2&after_id=m1", true).await.unwrap()).await;
    assert_eq!(ids(&b), ["m2"]);
    assert_eq!(bounds(&b), (false, json!("m2"), json!("m2")));
    let b = body(get("/v1/models?limit=1&before_id=m2", true).await.unwrap()).await;
    assert_eq!(ids(&b), ["m1"]);
    assert_eq!(
        bounds(&b),
        (true, json!("m1"), json!("m1")),
        "auto lies before"
    );
    let b = body(get("/v1/models?before_id=m1&limit=5", true).await.unwrap()).await;
    assert_eq!(ids(&b), ["auto"]);
    assert!(!b["has_more"].as_bool().unwrap());
    let b = body(get("/v1/models?after_id=m2", true).await.unwrap()).await;
    assert_eq!(
        (ids(&b).len(), bounds(&b)),
        (0, (false, Value::Null, Value::Null))
    );
    let b = body(get("/v1/models", true).await.unwrap()).await;
    assert_eq!(ids(&b), ["auto", "m1", "m2"], "without limit, one page");
    // OpenAI's list has no paging: the parameters are ignored.
    let b = body(
        get("/v1/models?limit=1&after_id=nope", false)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((b["object"].as_str(), ids(&b).len()), (Some("list"), 3));

    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=two", "limit"),
        ("after_id=nope", "after_id"),
        ("before_id=nope", "before_id"),
        ("after_id=auto&before_id=m2", "after_id"),
    ] {
        let r = get(&format!("/v1/models?{query}"), true).await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{query}");
        let e = body(r).await;
        assert_eq!(
            (&e["type"], &e["error"]["type"]),
            (&json!("error"), &json!("invalid_request_error"))
        );
        assert!(
            e["error"]["message"].as_str().unwrap().starts_with(field),
            "{query}: {e}"
        );
    }

    let m = body(get("/v1/models/m1", false).await.unwrap()).await;
    assert_eq!(
        (&m["id"], &m["object"], &m["owned_by"]),
        (&json!("m1"), &json!("model"), &json!("fake"))
    );
    assert!(m["created"].as_i64().unwrap() > 0);
    let m = body(get("/v1/models/auto", false).await.unwrap()).await;
    assert_eq!(m["owned_by"], "relay");
    let m = body(get("/v1/models/m2", true).await.unwrap()).await;
    assert_eq!(
        (&m["type"], &m["id"], &m["display_name"]),
        (&json!("model"), &json!("m2"), &json!("m2"))
    );
    assert!(m["created_at"].as_str().unwrap().ends_with('Z'));

    let r = get("/v1/models/nope", false).await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let e = body(r).await;
    assert_eq!(
        (&e["error"]["type"], &e["error"]["code"]),
        (&json!("invalid_request_error"), &json!("model_not_found"))
    );
    let r = get("/v1/models/nope", true).await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let e = body(r).await;
    assert_eq!(
        (&e["type"], &e["error"]["type"]),
        (&json!("error"), &json!("not_found_error"))
    );
    let r = app.get("/v1/models/m1", Some("rly_wrong")).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(body(r).await["error"]["type"], "authentication_error");
}
