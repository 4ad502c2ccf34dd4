//! Embeddings for note ranking (issue 44, `[memory] embeddings`): a configured provider's
//! OpenAI-compatible `POST /v1/embeddings` embeds each stored note once, in the background
//! (`worker`), and each ranking question once; the stores fuse the cosine into the lexical ranking
//! (`store::lexical::fusion`).
//!
//! `wrap` puts `Embedded` in front of the memory store, so every path that ranks notes (a leg's
//! injection, MCP `search_notes`, the console) gets the same ranking, and every write path wakes
//! the worker. Without embeddings, or whenever the endpoint fails or is slower than
//! `embed_timeout_ms`, ranking is lexical and nothing else changes.
//!
//! A conversation's legs all rank by their first user message, and the block must stay
//! byte-identical across them (prompt caching): the outcome for a question, a vector or
//! lexical ranking, is decided once, by its first leg, and kept (`Queries`), so a late answer
//! never changes a conversation's notes half-way.

mod client;
mod worker;

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::Notify;

use crate::config::{Config, Env};
use crate::domain::{NoteId, NoteText};
use crate::store::vectors::{Quantised, QueryVector, ToEmbed, normalised};
use crate::store::{InjectBudget, MemoryStore, NewNote, Note, Remembered, StoreResult};

/// Questions whose outcome is remembered; the least recently used go first.
const QUERIES_KEPT: usize = 4_096;
/// After a failed or slow question, later questions rank lexically without asking for this long,
/// so a down endpoint does not cost every leg its timeout.
const QUIET_AFTER_FAILURE: Duration = Duration::from_secs(10);

/// The memory store, `Embedded` in front of it when `[memory] embeddings` is set.
pub fn wrap(
    config: &Config,
    inner: Arc<dyn MemoryStore>,
    env: &dyn Env,
) -> anyhow::Result<Arc<dyn MemoryStore>> {
    let Some(e) = &config.memory.embeddings else {
        return Ok(inner);
    };
    let Some(provider) = config.providers.iter().find(|p| p.name == e.provider) else {
        anyhow::bail!(
            "memory.embeddings: provider `{}` is not among [[providers]]",
            e.provider
        );
    };
    let key = match &provider.api_key_env {
        Some(var) => Some(env.var(var).ok_or_else(|| {
            anyhow::anyhow!(
                "providers `{}`: the environment variable {var} (api_key_env) is not set",
                provider.name
            )
        })?),
        None => None,
    };
    let base = provider
        .base_url
        .clone()
        .unwrap_or_else(|| crate::providers::openai::DEFAULT_BASE_URL.to_owned());
    let shared = Arc::new(Embeddings {
        inner,
        client: client::Client::new(&base, key, e.model.clone())?,
        wake: Arc::new(Notify::new()),
        timeout: Duration::from_millis(config.memory.embed_timeout_ms),
        queries: Mutex::new(Queries::default()),
    });
    tokio::spawn(worker::run(Arc::downgrade(&shared)));
    Ok(Arc::new(Embedded(shared)))
}

/// What the worker and the ranking share.
struct Embeddings {
    inner: Arc<dyn MemoryStore>,
    client: client::Client,
    /// Tells the worker a note was written.
    wake: Arc<Notify>,
    timeout: Duration,
    queries: Mutex<Queries>,
}

/// Each question's outcome (`None`: rank lexically), by a hash of its text.
#[derive(Default)]
struct Queries {
    outcomes: HashMap<u64, (Option<Arc<QueryVector>>, u64)>,
    clock: u64,
    quiet_until: Option<Instant>,
}

impl Queries {
    fn get(&mut self, key: u64) -> Option<Option<Arc<QueryVector>>> {
        self.clock += 1;
        let now = self.clock;
        let (outcome, used) = self.outcomes.get_mut(&key)?;
        *used = now;
        Some(outcome.clone())
    }

    /// Keeps the first outcome decided for `key` and returns it.
    fn decide(&mut self, key: u64, outcome: Option<Arc<QueryVector>>) -> Option<Arc<QueryVector>> {
        if let Some(first) = self.get(key) {
            return first;
        }
        if self.outcomes.len() >= QUERIES_KEPT
            && let Some(oldest) = self
                .outcomes
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k)
        {
            self.outcomes.remove(&oldest);
        }
        self.outcomes.insert(key, (outcome.clone(), self.clock));
        outcome
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Embeddings {
    /// The question's vector, or `None` to rank lexically: decided by its first ranking.
    async fn question(&self, query: &str) -> Option<Arc<QueryVector>> {
        if query.trim().is_empty() {
            return None;
        }
        let mut h = DefaultHasher::new();
        query.hash(&mut h);
        let key = h.finish();
        {
            let mut q = lock(&self.queries);
            if let Some(outcome) = q.get(key) {
                return outcome;
            }
            if q.quiet_until.is_some_and(|t| Instant::now() < t) {
                return q.decide(key, None);
            }
        }
        let texts = [query.to_owned()];
        let asked = tokio::time::timeout(self.timeout, self.client.embed(&texts));
        let outcome = match asked.await {
            Ok(Ok(mut v)) => v.pop().and_then(normalised).map(|values| {
                Arc::new(QueryVector {
                    model: self.client.model.clone(),
                    values,
                })
            }),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "question not embedded; lexical ranking");
                None
            }
            Err(_) => {
                tracing::warn!(
                    timeout_ms = self.timeout.as_millis(),
                    "question not embedded in time; lexical ranking"
                );
                None
            }
        };
        let mut q = lock(&self.queries);
        if outcome.is_none() {
            q.quiet_until = Some(Instant::now() + QUIET_AFTER_FAILURE);
        }
        q.decide(key, outcome)
    }
}

/// The memory store with embeddings: writes wake the worker, rankings fuse the question's vector.
struct Embedded(Arc<Embeddings>);

#[async_trait]
impl MemoryStore for Embedded {
    async fn remember(&self, note: NewNote) -> StoreResult<Remembered> {
        let done = self.0.inner.remember(note).await?;
        if done.created {
            self.0.wake.notify_one();
        }
        Ok(done)
    }
    async fn recall(&self, u: &str, p: &str, limit: u32) -> StoreResult<Vec<String>> {
        self.0.inner.recall(u, p, limit).await
    }
    async fn list_notes(
        &self,
        u: &str,
        p: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(u64, Vec<Note>)> {
        self.0.inner.list_notes(u, p, limit, offset).await
    }
    async fn delete_note(&self, u: &str, id: &NoteId) -> StoreResult<u64> {
        self.0.inner.delete_note(u, id).await
    }
    async fn delete_project(&self, u: &str, p: &str) -> StoreResult<u64> {
        self.0.inner.delete_project(u, p).await
    }
    async fn get_note(&self, u: &str, id: &NoteId) -> StoreResult<Option<Note>> {
        self.0.inner.get_note(u, id).await
    }
    async fn edit_note(&self, u: &str, id: &NoteId, text: &NoteText) -> StoreResult<Option<Note>> {
        let edited = self.0.inner.edit_note(u, id, text).await?;
        if edited.is_some() {
            self.0.wake.notify_one();
        }
        Ok(edited)
    }
    async fn notes_for_injection(
        &self,
        u: &str,
        p: &str,
        query: &str,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        match self.0.question(query).await {
            Some(near) => {
                self.0
                    .inner
                    .notes_for_injection_near(u, p, query, &near, budget)
                    .await
            }
            None => self.0.inner.notes_for_injection(u, p, query, budget).await,
        }
    }
    async fn notes_for_injection_near(
        &self,
        u: &str,
        p: &str,
        query: &str,
        near: &QueryVector,
        budget: InjectBudget,
    ) -> StoreResult<Vec<Note>> {
        self.0
            .inner
            .notes_for_injection_near(u, p, query, near, budget)
            .await
    }
    async fn notes_to_embed(&self, model: &str, limit: u32) -> StoreResult<Vec<ToEmbed>> {
        self.0.inner.notes_to_embed(model, limit).await
    }
    async fn put_vectors(&self, model: &str, v: Vec<(ToEmbed, Quantised)>) -> StoreResult<()> {
        self.0.inner.put_vectors(model, v).await
    }
    async fn count_open_leg(&self) -> StoreResult<()> {
        self.0.inner.count_open_leg().await
    }
    async fn open_legs(&self) -> StoreResult<i64> {
        self.0.inner.open_legs().await
    }
    async fn delete_all_notes(&self, user_id: &str) -> StoreResult<u64> {
        self.0.inner.delete_all_notes(user_id).await
    }
    async fn forget_counters(&self, user_id: &str) -> StoreResult<()> {
        self.0.inner.forget_counters(user_id).await
    }
    async fn ping(&self) -> StoreResult<()> {
        self.0.inner.ping().await
    }
    async fn close(&self) {
        self.0.inner.close().await
    }
}
