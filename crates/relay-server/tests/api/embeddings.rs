//! `[memory] embeddings` (issue 44) against a fake `POST /v1/embeddings` (a test double): notes
//! are embedded in the background, the question's vector changes which notes a leg gets, a
//! failing or slow endpoint leaves ranking lexical, vectors go with their notes, and a new model
//! re-embeds every note. On both stores (`RELAY_TEST_BACKEND`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use relay_server::config::{Config, EmbeddingsConfig, ProviderConfig, ProviderKind};
use serde_json::{Value, json};

use crate::agent::with_fake;
use crate::fake_upstream::FakeUpstream;
use relay_server::Stores;

use crate::helpers::{TestApp, body, on_postgres, open_config};

/// How the fake answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Ok,
    Fail,
    /// Questions (requests with one text) answer after 2 s; note batches at once.
    SlowQuestions,
}

/// (model, texts) of one request.
type Request = (String, Vec<String>);

#[derive(Clone)]
struct Fake {
    mode: Arc<Mutex<Mode>>,
    seen: Arc<Mutex<Vec<Request>>>,
}

const DIMS: usize = 16;

/// Words that mean one thing, each group on its own axis; every other word on a hashed axis of
/// its own at a tenth of the weight, so texts sharing no meaning-word are far apart.
const MEANINGS: &[&[&str]] = &[
    &[
        "ship",
        "publish",
        "publishing",
        "release",
        "releases",
        "version",
    ],
    &["lunch", "food", "eat", "meal"],
    &["database", "postgres", "sqlite", "store"],
];

fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIMS];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let w = w.to_lowercase();
        match MEANINGS
            .iter()
            .position(|group| group.contains(&w.as_str()))
        {
            Some(axis) => v[axis] += 1.0,
            None => {
                let h = w
                    .bytes()
                    .fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
                v[MEANINGS.len() + h % (DIMS - MEANINGS.len())] += 0.1;
            }
        }
    }
    v
}

async fn embeddings(State(fake): State<Fake>, Json(req): Json<Value>) -> Response {
    let model = req["model"].as_str().unwrap_or_default().to_owned();
    let texts: Vec<String> = match &req["input"] {
        Value::String(s) => vec![s.clone()],
        v => serde_json::from_value(v.clone()).unwrap_or_default(),
    };
    fake.seen
        .lock()
        .unwrap()
        .push((model.clone(), texts.clone()));
    let mode = *fake.mode.lock().unwrap();
    if mode == Mode::Fail {
        return (StatusCode::INTERNAL_SERVER_ERROR, "down").into_response();
    }
    if mode == Mode::SlowQuestions && texts.len() == 1 {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": embed(t)}))
        .collect();
    Json(json!({"object": "list", "model": model, "data": data})).into_response()
}

impl Fake {
    async fn start(mode: Mode) -> (Self, SocketAddr) {
        let fake = Fake {
            mode: Arc::new(Mutex::new(mode)),
            seen: Arc::default(),
        };
        let app = axum::Router::new()
            .route("/v1/embeddings", post(embeddings))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (fake, addr)
    }

    /// Every note text embedded with `model`, in any request.
    fn embedded(&self, model: &str) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, texts)| m == model && !is_question(texts))
            .flat_map(|(_, t)| t.clone())
            .collect()
    }
}

fn is_question(texts: &[String]) -> bool {
    texts.len() == 1 && texts[0].ends_with('?')
}

/// Chat on the fake upstream; embeddings on `fake` with `model`.
fn config(dir: &std::path::Path, chat: &FakeUpstream, emb: SocketAddr, model: &str) -> Config {
    let mut c = with_fake(open_config(dir), chat);
    c.providers.push(ProviderConfig {
        base_url: Some(format!("http://{emb}/v1")),
        ..ProviderConfig::new("emb", ProviderKind::Openai)
    });
    c.memory.embeddings = Some(EmbeddingsConfig {
        provider: "emb".into(),
        model: model.into(),
    });
    c.memory.embed_timeout_ms = 300;
    c.limits.agent_burst = 1_000;
    c
}

/// Twelve notes: the one about publishing shares no word with the question asked below, the one
/// about the linter's version shares one.
const NOTES: &[&str] = &[
    "Publishing happens from the tools folder every Friday.",
    "The office plants are watered on Mondays.",
    "Coffee beans are in the second cupboard.",
    "Parking permits renew every January.",
    "The printer on floor two jams often.",
    "Lunch orders close at eleven.",
    "Standups are at half past nine.",
    "The wiki moved to the new domain.",
    "Holiday requests go through the portal.",
    "The linter version is pinned in the config.",
    "Badges open the side door after six.",
    "The fire drill is in March.",
];
const QUESTION: &str = "How do we ship a version?";

async fn fill(app: &TestApp) {
    for n in NOTES {
        let r = app.remember(None, "p", n).await;
        assert_eq!(r.status(), 200);
    }
}

/// The notes a leg asking `question` in project `p` gets.
async fn injected(app: &TestApp, question: &str) -> Vec<String> {
    let leg = json!({"messages": [{"role": "user", "content": question}], "project_id": "p"});
    let (status, lines) = app.leg(None, &leg).await;
    assert_eq!(status, 200, "{lines:?}");
    let ids: Vec<String> = serde_json::from_value(lines[0]["note_ids"].clone()).unwrap();
    let listed = app.list(None, "?project_id=p&limit=200").await;
    ids.iter()
        .map(|id| {
            listed["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["id"] == id.as_str())
                .map(|n| n["note"].as_str().unwrap().to_owned())
                .unwrap()
        })
        .collect()
}

/// (model, count) of the stored vectors, read as another client of the database would.
async fn vectors(app: &TestApp) -> Vec<(String, i64)> {
    let sql = "SELECT model, count(*) FROM note_vectors GROUP BY model ORDER BY model";
    let url = &app.state.config().memory.url;
    if on_postgres() {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query_as(sql).fetch_all(&pool).await.unwrap()
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        sqlx::query_as(sql).fetch_all(&pool).await.unwrap()
    }
}

/// Waits (bounded) until the stored vectors are `want`.
async fn until_vectors(app: &TestApp, want: &[(&str, i64)]) {
    let want: Vec<(String, i64)> = want.iter().map(|(m, n)| (m.to_string(), *n)).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = vectors(app).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "vectors {got:?}, expected {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn notes_are_embedded_once_and_the_question_vector_changes_what_is_injected() {
    let chat = FakeUpstream::start().await;
    let (fake, emb) = Fake::start(Mode::Ok).await;
    let app = TestApp::spawn_with(|dir| config(dir, &chat, emb, "m-one")).await;
    fill(&app).await;
    until_vectors(&app, &[("m-one", 12)]).await;
    let mut embedded = fake.embedded("m-one");
    embedded.sort();
    let mut all: Vec<String> = NOTES.iter().map(|s| s.to_string()).collect();
    all.sort();
    assert_eq!(embedded, all, "each note embedded once");

    let notes = injected(&app, QUESTION).await;
    assert!(
        notes.iter().any(|n| n == NOTES[0]),
        "the note near in meaning is found: {notes:?}"
    );
    // Legs of the same conversation get the same notes, and the question is embedded once.
    assert_eq!(injected(&app, QUESTION).await, notes);
    let asked = fake
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, t)| t.len() == 1 && t[0] == QUESTION)
        .count();
    assert_eq!(asked, 1);

    // Without embeddings, on the same notes, ranking is lexical: the publishing note is not found.
    let lexical = TestApp::spawn_with(|dir| {
        let mut c = with_fake(open_config(dir), &chat);
        c.limits.agent_burst = 1_000;
        c
    })
    .await;
    fill(&lexical).await;
    let plain = injected(&lexical, QUESTION).await;
    assert!(!plain.iter().any(|n| n == NOTES[0]), "{plain:?}");
}

#[tokio::test]
async fn a_failing_or_slow_endpoint_leaves_ranking_lexical() {
    let chat = FakeUpstream::start().await;
    let (fake, emb) = Fake::start(Mode::Ok).await;
    let app = TestApp::spawn_with(|dir| config(dir, &chat, emb, "m-one")).await;
    fill(&app).await;
    until_vectors(&app, &[("m-one", 12)]).await;

    *fake.mode.lock().unwrap() = Mode::SlowQuestions;
    let started = Instant::now();
    let slow = injected(&app, "How do we ship a version now?").await;
    let took = started.elapsed();
    assert!(!slow.iter().any(|n| n == NOTES[0]), "lexical: {slow:?}");
    assert!(
        took < Duration::from_millis(1_500),
        "the leg waited {took:?}"
    );
    // The conversation stays lexical even once the endpoint answers again.
    *fake.mode.lock().unwrap() = Mode::Ok;
    assert_eq!(injected(&app, "How do we ship a version now?").await, slow);

    *fake.mode.lock().unwrap() = Mode::Fail;
    let failed = injected(&app, "How do we ship a version again?").await;
    assert!(!failed.iter().any(|n| n == NOTES[0]), "lexical: {failed:?}");
    assert!(
        failed.iter().any(|n| n == NOTES[9]),
        "lexical finds the version note: {failed:?}"
    );
}

#[tokio::test]
async fn vectors_go_with_their_notes_and_a_new_model_embeds_again() {
    let chat = FakeUpstream::start().await;
    let (fake, emb) = Fake::start(Mode::Ok).await;
    let app = TestApp::spawn_with(|dir| config(dir, &chat, emb, "m-one")).await;
    fill(&app).await;
    app.remember(None, "q", "A note in another project.").await;
    until_vectors(&app, &[("m-one", 13)]).await;

    let first = "/v1/memory/mem%23local%23p%231";
    assert_eq!(app.delete(first, None).await.status(), 200);
    until_vectors(&app, &[("m-one", 12)]).await;
    let r = app.delete("/v1/memory/all?project_id=q", None).await;
    assert_eq!(body(r).await["deleted"], 1);
    until_vectors(&app, &[("m-one", 11)]).await;

    // Another instance on the same store with another model re-embeds every note.
    let url = app.state.config().memory.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), &chat, emb, "m-two");
    c.memory.url = url;
    let stores = Stores::open(&c).await.unwrap();
    let second = TestApp::spawn(c, stores, dir).await;
    until_vectors(&second, &[("m-two", 11)]).await;
    assert_eq!(fake.embedded("m-two").len(), 11);

    // The GDPR cascade takes every vector.
    let r = second.delete("/v1/memory/all", None).await;
    assert_eq!(body(r).await["deleted"], 11);
    assert!(vectors(&second).await.is_empty());
}
