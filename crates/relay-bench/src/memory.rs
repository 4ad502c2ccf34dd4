//! Evidence recall of note injection on LoCoMo-shaped conversations, through the HTTP surface of
//! a real Relay (in this process, on a port, open mode, the offline demo provider).
//!
//! Every dialogue turn is stored as one note, `"<speaker> on <session date>: <text>"`, through
//! `POST /v1/memory/remember`, in dialogue order, one project per conversation. Every question
//! with evidence (categories 1-4) is asked as the user message of an agent leg in that project;
//! the leg's first NDJSON line names the notes injected (`note_ids`), which `GET /v1/memory/list`
//! maps back to turns. The score is the share of the question's evidence turns among them
//! (evidence recall at the number injected), averaged over questions. Plain BM25 (k1 1.2, b 0.75,
//! no stemming) over the same notes, top 8, is computed here beside it, and the ranker's signals
//! are taken away one at a time in-process (`relay_server::store::lexical`) to show what each
//! adds.
//!
//! The data set is read from the path given (a `.json` or `.json.gz` file, or a folder holding
//! one); it is never copied into the repository (LoCoMo is CC BY-NC 4.0, evaluation only).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use relay_server::config::{
    Config, EmbeddingsConfig, MemoryConfig, ModelConfig, ProviderConfig, ProviderKind,
};
use relay_server::domain::{Author, MemType, NoteId};
use relay_server::store::lexical::{LexIndex, Params, Row};
use relay_server::store::{Note, relevance};
use relay_server::{Relay, Stores};
use serde::Serialize;
use serde_json::{Value, json};

/// Notes a leg may inject (Relay's default `inject_max_notes`).
const AT: usize = 8;

/// One conversation: its turns (id, note text) in order, and its scored questions.
struct Conversation {
    turns: Vec<(String, String)>,
    questions: Vec<Question>,
}

struct Question {
    text: String,
    category: u64,
    evidence: Vec<String>,
}

/// Recall of one method.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Recall {
    pub method: String,
    /// Mean share of evidence turns among the notes chosen.
    pub recall: f64,
    /// Share of questions with all their evidence chosen.
    pub all_found: f64,
    /// Per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop): (questions, recall).
    pub by_category: Vec<(u64, usize, f64)>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct MemoryResult {
    pub backend: String,
    pub conversations: usize,
    pub notes: usize,
    pub questions: usize,
    /// Notes Relay injected per leg, on average.
    pub mean_injected: f64,
    /// Relay through HTTP first, then the in-process rows.
    pub rows: Vec<Recall>,
}

/// An OpenAI-compatible embeddings server for the run with embeddings (issue 44).
#[derive(Debug, Clone)]
pub struct Embedder {
    /// Ending in `/v1`, as a provider's `base_url`.
    pub base_url: String,
    pub model: String,
}

/// Starts `bench/embed_server.py` (MiniLM in numpy) with `python` on a free port; it stops when
/// the child is dropped.
pub async fn start_embedder(
    python: &Path,
    script: &Path,
) -> Result<(tokio::process::Child, Embedder)> {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .args(["--port", "0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {} {}", python.display(), script.display()))?;
    let out = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    tokio::io::BufReader::new(out).read_line(&mut line).await?;
    let port = line
        .trim()
        .strip_prefix("listening on ")
        .with_context(|| format!("the embeddings server said {line:?}"))?;
    Ok((
        child,
        Embedder {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            model: "all-MiniLM-L6-v2".into(),
        },
    ))
}

/// A Relay in this process on a port, and how to stop it.
struct Running {
    base: String,
    relay: Relay,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start_relay(url: &str, embedder: Option<&Embedder>) -> Result<Running> {
    let mut config = Config {
        bind: "127.0.0.1:0".parse()?,
        memory: MemoryConfig {
            url: url.to_owned(),
            ..MemoryConfig::default()
        },
        ..Config::default()
    };
    config.limits.agent_per_minute = 1_000_000;
    config.limits.agent_burst = 1_000_000;
    if let Some(e) = embedder {
        // With a provider configured the demo one is no longer implied: name it for the legs.
        config
            .providers
            .push(ProviderConfig::new("demo", ProviderKind::Demo));
        config.models.push(ModelConfig {
            name: "demo".into(),
            provider: "demo".into(),
            upstream: "demo".into(),
            ..ModelConfig::default()
        });
        config.routing.auto = vec!["demo".into()];
        config.providers.push(ProviderConfig {
            base_url: Some(e.base_url.clone()),
            ..ProviderConfig::new("embedder", ProviderKind::Openai)
        });
        config.memory.embeddings = Some(EmbeddingsConfig {
            provider: "embedder".into(),
            model: e.model.clone(),
        });
        // The numpy model on a shared 2-core machine takes longer than a served one: this row
        // measures ranking, so every question is waited for.
        config.memory.embed_timeout_ms = 30_000;
    }
    let stores = Stores::open(&config).await?;
    let relay = Relay::with_stores(config, stores, &NoKeys)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let router = relay.router();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(relay_server::serve(listener, router, async {
        let _ = stopped.await;
    }));
    Ok(Running {
        base,
        relay,
        stop,
        server,
    })
}

impl Running {
    async fn close(self) {
        let _ = self.stop.send(());
        let _ = self.server.await;
        self.relay.close().await;
    }
}

/// How many of `project`'s notes have a vector, read from the store as another client would.
async fn vectors_of(url: &str, project: &str) -> Result<i64> {
    let sql = "SELECT count(*) FROM note_vectors WHERE project_id = $1";
    Ok(if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await?;
        let n = sqlx::query_scalar(sql)
            .bind(project)
            .fetch_one(&pool)
            .await?;
        pool.close().await;
        n
    } else {
        let pool = sqlx::PgPool::connect(url).await?;
        let n = sqlx::query_scalar(sql)
            .bind(project)
            .fetch_one(&pool)
            .await?;
        pool.close().await;
        n
    })
}

/// Runs the stage on the data set at `dataset`, on SQLite or (with `postgres_url`, a database of
/// its own) PostgreSQL; `conversations` limits how many are used. With `embedder`, a second Relay
/// on the same store ranks with embeddings, and its legs are scored beside the lexical ones.
pub async fn measure(
    dataset: &Path,
    postgres_url: Option<&str>,
    conversations: Option<usize>,
    embedder: Option<&Embedder>,
) -> Result<MemoryResult> {
    let mut convs = load(dataset)?;
    if let Some(n) = conversations {
        convs.truncate(n);
    }
    let dir = tempfile::tempdir()?;
    let url = match postgres_url {
        Some(u) => u.to_owned(),
        None => format!("sqlite://{}", dir.path().join("memory.db").display()),
    };
    let lexical = start_relay(&url, None).await?;
    let embedded = match embedder {
        Some(e) => Some(start_relay(&url, Some(e)).await?),
        None => None,
    };
    let base = lexical.base.clone();
    // Notes go in through the Relay with embeddings, whose writes wake its embedder.
    let writer = embedded.as_ref().map_or(base.clone(), |r| r.base.clone());
    let client = reqwest::Client::new();
    let mut result = MemoryResult {
        backend: if postgres_url.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
        .into(),
        conversations: convs.len(),
        ..MemoryResult::default()
    };
    let variants = variants();
    let fused_at = variants.len() + 3;
    let mut scores: Vec<Vec<(u64, f64)>> =
        vec![Vec::new(); fused_at + crate::memory_fusion::WEIGHTS.len()];
    let mut injected_total = 0usize;
    for (c, conv) in convs.iter().enumerate() {
        let project = format!("locomo-{c}");
        for (_, text) in &conv.turns {
            let r = client
                .post(format!("{writer}/v1/memory/remember"))
                .json(&json!({"note": text, "project_id": project}))
                .send()
                .await?;
            if !r.status().is_success() {
                bail!("remember answered {}", r.status());
            }
        }
        let stored = list(&client, &base, &project).await?;
        result.notes += stored.len();
        if embedded.is_some() {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1_800);
            while vectors_of(&url, &project).await? < stored.len() as i64 {
                if std::time::Instant::now() > deadline {
                    bail!("the notes of {project} were not all embedded in 30 minutes");
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
        let turn_of = turns_by_text(&conv.turns);
        let id_turns: HashMap<String, Vec<String>> = stored
            .iter()
            .map(|n| {
                (
                    n.id.as_str().to_owned(),
                    turn_of.get(&fold(&n.note)).cloned().unwrap_or_default(),
                )
            })
            .collect();
        // The in-process index of the same notes, in the order Relay stored them.
        let lex = LexIndex::build(
            stored
                .iter()
                .enumerate()
                .map(|(i, n)| Row {
                    order: i as i64,
                    seq: i as i64,
                    note: n.clone(),
                })
                .collect(),
        )
        .context("index")?;
        let bm25 = PlainBm25::new(&stored);
        // With embeddings, the fused ranking in-process at each lexical weight.
        let fusion = match embedder {
            Some(e) => {
                let texts: Vec<&str> = stored.iter().map(|n| n.note.as_str()).collect();
                let vectors = crate::memory_fusion::embed(&client, e, &texts).await?;
                let set = crate::memory_fusion::vector_set(&e.model, &stored, vectors);
                let questions: Vec<&str> = conv.questions.iter().map(|q| q.text.as_str()).collect();
                let asked = crate::memory_fusion::embed(&client, e, &questions).await?;
                Some((set, asked))
            }
            None => None,
        };
        // The turns of in-process rankings' entries (indexes into `stored`).
        let turns_of = |ranked: Vec<(u32, f64)>| -> Vec<&String> {
            ranked
                .into_iter()
                .flat_map(|(at, _)| {
                    turn_of
                        .get(&fold(&stored[at as usize].note))
                        .into_iter()
                        .flatten()
                })
                .collect()
        };
        for (qi, q) in conv.questions.iter().enumerate() {
            let ids = leg_note_ids(&client, &base, &project, &q.text).await?;
            injected_total += ids.len();
            let chosen: Vec<&String> = ids
                .iter()
                .flat_map(|id| id_turns.get(id).into_iter().flatten())
                .collect();
            scores[0].push((q.category, recall(&q.evidence, &chosen)));
            if let Some(e) = &embedded {
                let ids = leg_note_ids(&client, &e.base, &project, &q.text).await?;
                let chosen: Vec<&String> = ids
                    .iter()
                    .flat_map(|id| id_turns.get(id).into_iter().flatten())
                    .collect();
                scores[variants.len() + 2].push((q.category, recall(&q.evidence, &chosen)));
            }
            let plain: Vec<&String> = bm25
                .top(&q.text, AT)
                .into_iter()
                .flat_map(|i| turn_of.get(&fold(&stored[i].note)).into_iter().flatten())
                .collect();
            scores[1].push((q.category, recall(&q.evidence, &plain)));
            for (v, (_, params)) in variants.iter().enumerate() {
                let picked = turns_of(lex.ranked(&q.text, params, AT));
                scores[v + 2].push((q.category, recall(&q.evidence, &picked)));
            }
            if let Some((set, asked)) = &fusion {
                let near = crate::memory_fusion::query(asked.get(qi).cloned().unwrap_or_default());
                for (w, (weight, share)) in crate::memory_fusion::WEIGHTS.iter().enumerate() {
                    let p = Params {
                        lexical_weight: *weight,
                        dense_neighbour_share: *share,
                        ..Params::default()
                    };
                    let picked = turns_of(lex.fused(&q.text, &near, set, &p, AT));
                    scores[fused_at + w].push((q.category, recall(&q.evidence, &picked)));
                }
            }
        }
    }
    lexical.close().await;
    if let Some(e) = embedded {
        e.close().await;
    }
    let mut names = vec![
        "Relay (HTTP, injected notes, lexical)".to_owned(),
        "plain BM25 top 8 (no stemming)".to_owned(),
    ];
    names.extend(variants.iter().map(|(n, _)| (*n).to_owned()));
    if let Some(e) = embedder {
        names.push(format!(
            "Relay (HTTP, injected notes, with embeddings: {})",
            e.model
        ));
        names.extend(crate::memory_fusion::WEIGHTS.iter().map(|(w, s)| {
            format!(
                "in-process: fused, lexical weight {w}, neighbour share of the cosine {s} (top 8, no relevance floor)"
            )
        }));
    } else {
        scores.truncate(fused_at - 1);
    }
    result.questions = scores[0].len();
    result.mean_injected = injected_total as f64 / result.questions.max(1) as f64;
    result.rows = names
        .into_iter()
        .zip(scores)
        .map(|(method, s)| summarize(method, &s))
        .collect();
    Ok(result)
}

/// In-process rankings: Relay's ranker with one signal taken away at a time.
fn variants() -> Vec<(&'static str, Params)> {
    let d = Params::default();
    vec![
        ("in-process: Relay's ranker, top 8 (no relevance floor)", d),
        ("in-process: BM25 with stemming only", Params::plain()),
        (
            "  without neighbour words",
            Params {
                neighbour_words: 0.0,
                ..d
            },
        ),
        (
            "  without the neighbour score share",
            Params {
                neighbour_share: 0.0,
                ..d
            },
        ),
        ("  without the entity boost", Params { entity: 0.0, ..d }),
        (
            "  without pseudo-relevance feedback",
            Params {
                prf_weight: 0.0,
                ..d
            },
        ),
    ]
}

fn summarize(method: String, s: &[(u64, f64)]) -> Recall {
    let mean = |xs: &[f64]| {
        if xs.is_empty() {
            0.0
        } else {
            xs.iter().sum::<f64>() / xs.len() as f64
        }
    };
    let all: Vec<f64> = s.iter().map(|(_, r)| *r).collect();
    let by_category = (1..=4)
        .map(|c| {
            let xs: Vec<f64> = s.iter().filter(|(k, _)| *k == c).map(|(_, r)| *r).collect();
            (c, xs.len(), mean(&xs))
        })
        .collect();
    Recall {
        method,
        recall: mean(&all),
        all_found: mean(
            &all.iter()
                .map(|r| if *r >= 1.0 { 1.0 } else { 0.0 })
                .collect::<Vec<_>>(),
        ),
        by_category,
    }
}

/// The share of `evidence` among `chosen`.
fn recall(evidence: &[String], chosen: &[&String]) -> f64 {
    let found = evidence.iter().filter(|e| chosen.contains(e)).count();
    found as f64 / evidence.len() as f64
}

fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn turns_by_text(turns: &[(String, String)]) -> HashMap<String, Vec<String>> {
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for (id, text) in turns {
        map.entry(fold(text)).or_default().push(id.clone());
    }
    map
}

/// Every note of `project`, oldest first.
async fn list(client: &reqwest::Client, base: &str, project: &str) -> Result<Vec<Note>> {
    let mut out = Vec::new();
    loop {
        let page: Value = client
            .get(format!(
                "{base}/v1/memory/list?project_id={project}&limit=200&offset={}",
                out.len()
            ))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return Ok(out);
        }
        for item in items {
            out.push(Note {
                id: NoteId::from_stored(
                    item["id"]
                        .as_str()
                        .context("a note without an id")?
                        .to_owned(),
                ),
                project_id: project.to_owned(),
                note: item["note"].as_str().unwrap_or_default().to_owned(),
                author: Author::default(),
                mem_type: MemType::default(),
                created_at: item["created_at"].as_f64().unwrap_or_default(),
            });
        }
    }
}

/// Asks `question` in `project` and returns the ids of the notes the leg's first line names.
async fn leg_note_ids(
    client: &reqwest::Client,
    base: &str,
    project: &str,
    question: &str,
) -> Result<Vec<String>> {
    let mut tries = 0;
    let body = loop {
        let r = client
            .post(format!("{base}/v1/agent/stream"))
            .json(
                &json!({"project_id": project, "messages": [{"role": "user", "content": question}]}),
            )
            .send()
            .await?;
        let status = r.status();
        let text = r.text().await?;
        if status.is_success() {
            break text;
        }
        // Two Relays share one SQLite file here, beside a background embedder: on a starved
        // machine a leg's store write can outwait the busy timeout. Such a leg is asked again.
        tries += 1;
        if status != reqwest::StatusCode::SERVICE_UNAVAILABLE || tries == 3 {
            bail!("the leg answered {status}: {text}");
        }
        eprintln!("a leg answered {status} ({text}); asking again");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    let first: Value = serde_json::from_str(body.lines().next().unwrap_or_default())?;
    if first["event"] != "start" {
        bail!("the leg's first line is not its start: {first}");
    }
    Ok(first["note_ids"]
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

/// No provider keys: the demo provider answers every leg.
struct NoKeys;

impl relay_server::config::Env for NoKeys {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

/// BM25 as textbooks give it, over lower-cased words without stemming; the question's words as
/// Relay picks them (`relevance::query_terms`).
struct PlainBm25 {
    docs: Vec<HashMap<String, u32>>,
    lens: Vec<f64>,
    df: HashMap<String, usize>,
}

impl PlainBm25 {
    fn new(notes: &[Note]) -> Self {
        let mut docs = Vec::new();
        let mut lens = Vec::new();
        let mut df: HashMap<String, usize> = HashMap::new();
        for n in notes {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let mut len = 0.0;
            for w in n
                .note
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
                *tf.entry(w.to_lowercase()).or_default() += 1;
                len += 1.0;
            }
            for w in tf.keys() {
                *df.entry(w.clone()).or_default() += 1;
            }
            docs.push(tf);
            lens.push(len);
        }
        Self { docs, lens, df }
    }

    fn top(&self, query: &str, k: usize) -> Vec<usize> {
        let (k1, b) = (1.2, 0.75);
        let n = self.docs.len() as f64;
        let avgdl = self.lens.iter().sum::<f64>() / n.max(1.0);
        let terms = relevance::query_terms(query);
        let mut scored: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, tf)| {
                let s = terms
                    .iter()
                    .map(|t| {
                        let f = f64::from(tf.get(t).copied().unwrap_or(0));
                        let df = self.df.get(t).copied().unwrap_or(0) as f64;
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        idf * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * self.lens[i] / avgdl))
                    })
                    .sum();
                (i, s)
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        scored.into_iter().take(k).map(|(i, _)| i).collect()
    }
}

/// The conversations of the data set at `path`.
fn load(path: &Path) -> Result<Vec<Conversation>> {
    let file = data_file(path)?;
    let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let text = if file.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(bytes.as_slice()).read_to_string(&mut s)?;
        s
    } else {
        String::from_utf8(bytes)?
    };
    let samples: Vec<Value> = serde_json::from_str(&text)?;
    samples.iter().map(conversation).collect()
}

fn data_file(path: &Path) -> Result<PathBuf> {
    if path.is_file() {
        return Ok(path.to_owned());
    }
    for entry in
        std::fs::read_dir(path).with_context(|| format!("cannot read {}", path.display()))?
    {
        let p = entry?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.ends_with(".json") || name.ends_with(".json.gz") {
            return Ok(p);
        }
    }
    bail!("no .json or .json.gz file in {}", path.display())
}

fn conversation(sample: &Value) -> Result<Conversation> {
    let conv = sample["conversation"]
        .as_object()
        .context("no conversation")?;
    let mut sessions: Vec<(u64, &Vec<Value>, String)> = conv
        .iter()
        .filter_map(|(k, v)| {
            let n: u64 = k.strip_prefix("session_")?.parse().ok()?;
            let date = conv
                .get(&format!("session_{n}_date_time"))?
                .as_str()?
                .to_owned();
            Some((n, v.as_array()?, date))
        })
        .collect();
    sessions.sort_by_key(|(n, _, _)| *n);
    let mut turns = Vec::new();
    for (_, list, date) in sessions {
        for t in list {
            let (Some(id), Some(speaker), Some(text)) = (
                t["dia_id"].as_str(),
                t["speaker"].as_str(),
                t["text"].as_str(),
            ) else {
                continue;
            };
            turns.push((id.to_owned(), format!("{speaker} on {date}: {text}")));
        }
    }
    let known: std::collections::HashSet<&str> = turns.iter().map(|(id, _)| id.as_str()).collect();
    let mut questions = Vec::new();
    for qa in sample["qa"].as_array().into_iter().flatten() {
        let category = qa["category"].as_u64().unwrap_or(0);
        if !(1..=4).contains(&category) {
            continue;
        }
        // A few evidence entries hold several ids ("D8:6; D9:17"); ids of no turn are dropped.
        let evidence: Vec<String> = qa["evidence"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .flat_map(|e| e.split([';', ',', ' ']))
            .map(str::trim)
            .filter(|e| known.contains(e))
            .map(str::to_owned)
            .collect();
        let Some(text) = qa["question"].as_str() else {
            continue;
        };
        if evidence.is_empty() {
            continue;
        }
        questions.push(Question {
            text: text.to_owned(),
            category,
            evidence,
        });
    }
    Ok(Conversation { turns, questions })
}

impl MemoryResult {
    /// The report's table.
    pub fn markdown(&self, command: &str) -> String {
        let mut out = format!(
            "Evidence recall at {AT} notes, {} ({} conversations, {} notes, {} questions; Relay injected {:.2} notes a leg)\n\n`{command}`\n\n| method | recall@{AT} | all evidence found | multi-hop | temporal | open-domain | single-hop |\n|---|---|---|---|---|---|---|\n",
            self.backend, self.conversations, self.notes, self.questions, self.mean_injected
        );
        for r in &self.rows {
            let cats: Vec<String> = r
                .by_category
                .iter()
                .map(|(_, n, x)| format!("{x:.3} ({n})"))
                .collect();
            out.push_str(&format!(
                "| {} | {:.3} | {:.3} | {} |\n",
                r.method,
                r.recall,
                r.all_found,
                cats.join(" | ")
            ));
        }
        out
    }
}
