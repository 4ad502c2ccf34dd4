//! Note injection time, measured in-process through the `relay-server` library: a SQLite store
//! with many coding notes in one project, and `notes_for_injection` (what every agent leg calls)
//! timed over varied questions. No HTTP and no other load: this is the store's own cost.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use relay_server::domain::{Author, MemType, NoteText, ProjectId};
use relay_server::store::sqlite::SqliteStore;
use relay_server::store::{InjectBudget, MemoryStore, NewNote, StoreOptions};
use serde::Serialize;

use crate::data::{PROJECT, Rng, note, question};
use crate::load::summarize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct InjectionResult {
    pub notes: usize,
    /// Questions timed; fewer than `asked` when the time budget ran out.
    pub questions: usize,
    pub asked: usize,
    /// In-process `remember` calls per second while filling the project (one transaction each;
    /// the first `REMEMBER_FILL` notes, the rest go in bulk).
    pub remember_per_sec: f64,
    /// The same questions by SQL alone (FTS5's bm25), timed before the index is read: the
    /// path every leg took before the in-memory index, p50 and p99.
    pub sql_p50_ms: f64,
    pub sql_p99_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Notes injected per question on average (the budget allows 8): shows the lookups matched.
    pub mean_injected: f64,
}

/// Notes filled through `remember` (one transaction each, the server's own write path); past this
/// the project grows by `insert_notes_bulk`, thousands of notes a transaction, so 100,000 notes
/// take seconds instead of most of a minute.
const REMEMBER_FILL: usize = 10_000;

/// Notes a bulk transaction carries.
const BULK_CHUNK: usize = 5_000;

/// Fills a fresh store under `dir` with `notes` notes and times `questions` injections, or as many
/// as `time_budget` allows.
pub async fn measure(
    dir: &Path,
    notes: usize,
    questions: usize,
    time_budget: Duration,
) -> Result<InjectionResult> {
    measure_growth(dir, &[notes], questions, time_budget)
        .await?
        .pop()
        .ok_or_else(|| anyhow::anyhow!("no injection measured"))
}

/// Grows one project in a fresh store under `dir` to each of `sizes` in turn (ascending) and
/// times the same `questions` at each size: how injection's cost grows with the project. Before
/// timing, the project's note index is read, as the first leg after a write starts it in a
/// running server.
pub async fn measure_growth(
    dir: &Path,
    sizes: &[usize],
    questions: usize,
    time_budget: Duration,
) -> Result<Vec<InjectionResult>> {
    let url = format!("sqlite://{}", dir.join("inject.db").display());
    // The server's defaults (`[memory]`): 8 connections, 5 s busy timeout.
    let store = SqliteStore::open(
        &url,
        &StoreOptions {
            max_connections: 8,
            busy_timeout: Duration::from_secs(5),
        },
    )
    .await?;
    let user = "u_bench";
    let project = ProjectId::parse(PROJECT).map_err(anyhow::Error::msg)?;
    let mut rng = Rng::new(42);
    let new_note = |rng: &mut Rng, i: usize| -> Result<NewNote> {
        Ok(NewNote {
            user_id: user.into(),
            project_id: project.clone(),
            text: NoteText::parse(&note(rng, i), "note").map_err(anyhow::Error::msg)?,
            author: Author::default(),
            mem_type: MemType::default(),
            created_at: 1_700_000_000.0 + i as f64,
        })
    };
    let mut filled = 0usize;
    let mut remember_per_sec = f64::NAN;
    let mut results = Vec::new();
    for &size in sizes {
        let by_remember = size.min(REMEMBER_FILL);
        if filled < by_remember {
            let filling = Instant::now();
            let from = filled;
            while filled < by_remember {
                store.remember(new_note(&mut rng, filled)?).await?;
                filled += 1;
            }
            remember_per_sec = (filled - from) as f64 / filling.elapsed().as_secs_f64();
        }
        while filled < size {
            let chunk = (filled..size.min(filled + BULK_CHUNK))
                .map(|i| new_note(&mut rng, i))
                .collect::<Result<Vec<_>>>()?;
            filled += chunk.len();
            store.insert_notes_bulk(&chunk).await?;
        }
        let sql = time_questions(&store, user, questions, time_budget, Way::Sql).await?;
        store.build_injection_index(user, PROJECT).await?;
        let mut r = time_questions(&store, user, questions, time_budget, Way::Index).await?;
        r.sql_p50_ms = sql.p50_ms;
        r.sql_p99_ms = sql.p99_ms;
        r.notes = size;
        r.remember_per_sec = remember_per_sec;
        results.push(r);
    }
    store.pool().close().await;
    Ok(results)
}

/// Which way a timed lookup goes.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Sql,
    Index,
}

/// Times `questions` injections into the filled project.
async fn time_questions(
    store: &SqliteStore,
    user: &str,
    questions: usize,
    time_budget: Duration,
    way: Way,
) -> Result<InjectionResult> {
    // Relay's default budget (`inject_max_notes`, `inject_max_chars`).
    let budget = InjectBudget {
        max_notes: 8,
        max_chars: 6_000,
    };
    let lookup = |q: &str| {
        let q = q.to_owned();
        async move {
            match way {
                Way::Sql => {
                    store
                        .notes_for_injection_by_sql(user, PROJECT, &q, budget)
                        .await
                }
                Way::Index => store.notes_for_injection(user, PROJECT, &q, budget).await,
            }
        }
    };
    let mut rng = Rng::new(99);
    let asked: Vec<String> = (0..questions).map(|_| question(&mut rng)).collect();
    // Warm the page cache and the statement cache first, as a running server would have them.
    let deadline = Instant::now() + time_budget;
    for q in asked.iter().take(5) {
        lookup(q).await?;
    }
    let mut times = Vec::with_capacity(asked.len());
    let mut injected = 0usize;
    for q in &asked {
        // A pathologically slow lookup must not hold the whole run hostage: past the budget the
        // figures come from the questions timed so far, and the report says how many.
        if Instant::now() > deadline && !times.is_empty() {
            break;
        }
        let t0 = Instant::now();
        let got = lookup(q).await?;
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        injected += got.len();
    }
    let measured = times.len();
    let (p50_ms, p90_ms, p99_ms, max_ms) = summarize(&mut times);
    Ok(InjectionResult {
        notes: 0,
        questions: measured,
        asked: questions,
        remember_per_sec: f64::NAN,
        sql_p50_ms: f64::NAN,
        sql_p99_ms: f64::NAN,
        p50_ms,
        p90_ms,
        p99_ms,
        max_ms,
        mean_injected: injected as f64 / measured.max(1) as f64,
    })
}
