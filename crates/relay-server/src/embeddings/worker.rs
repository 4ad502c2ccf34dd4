//! Embedding stored notes in the background: woken by each new or edited note, and every half
//! minute for notes written by another instance or left by a failed batch, it embeds the notes
//! that have no vector of the configured model (all of them after a model change), in batches,
//! off the remember path.

use std::sync::Weak;
use std::time::{Duration, Instant};

use super::Embeddings;
use crate::store::vectors::quantise;

/// Notes per embeddings request at most. A failed request halves the next one (down to one note),
/// a successful one doubles it back: a slow endpoint that cannot embed 64 notes within the request
/// timeout still gets through them, fewer at a time.
const BATCH: u32 = 64;
/// How often the store is looked at without a wake-up.
const POLL: Duration = Duration::from_secs(30);
/// The worker spends one part in `WORK_SHARE` of its time on its own work (reading notes,
/// parsing and quantising vectors, storing them) while notes wait: after each full batch it
/// pauses for the rest. Remembers are what agents wait on, and a note without a vector yet ranks
/// lexically, so under a flood of remembers the vectors come later instead of taking the
/// remembers' CPU (measured: with no pause, remember throughput fell from about 9,900/s to
/// 5,700/s on 2 cores and Relay's CPU per remember doubled; with it, 8,400-8,500/s against
/// 9,100-9,300/s). The wait on the endpoint itself does not count.
const WORK_SHARE: u32 = 10;
/// After a failure, the first and the longest pause before trying again.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Runs until the embeddings it serves are dropped (the app stopped).
pub async fn run(shared: Weak<Embeddings>) {
    let mut backoff = FIRST_BACKOFF;
    let mut batch = BATCH;
    loop {
        let Some(this) = shared.upgrade() else { return };
        let wake = this.wake.clone();
        let outcome = pass(&this, &mut batch).await;
        drop(this);
        let pause = match outcome {
            Ok(()) => {
                backoff = FIRST_BACKOFF;
                POLL
            }
            Err(e) => {
                tracing::warn!(error = %e, "notes not embedded; trying again later");
                backoff = (backoff * 2).min(MAX_BACKOFF);
                backoff
            }
        };
        let _ = tokio::time::timeout(pause, wake.notified()).await;
    }
}

/// Embeds every note without a vector of the model, `size` notes at a time.
async fn pass(this: &Embeddings, size: &mut u32) -> Result<(), String> {
    let model = &this.client.model;
    loop {
        let started = Instant::now();
        let batch = this
            .inner
            .notes_to_embed(model, *size)
            .await
            .map_err(|e| e.to_string())?;
        if batch.is_empty() {
            return Ok(());
        }
        let full = batch.len() == *size as usize;
        let texts: Vec<String> = batch.iter().map(|n| n.text.clone()).collect();
        let asked = Instant::now();
        let answer = this.client.embed(&texts).await;
        let waited = asked.elapsed();
        let vectors = match answer {
            Ok(v) => {
                *size = (*size * 2).min(BATCH);
                v
            }
            Err(e) => {
                *size = (*size / 2).max(1);
                return Err(e);
            }
        };
        let pairs: Vec<_> = batch
            .into_iter()
            .zip(vectors)
            .filter_map(|(note, v)| quantise(&v).map(|q| (note, q)))
            .collect();
        // A batch with nothing storable would come back forever: stop until the next wake-up.
        if pairs.is_empty() {
            return Err("the embeddings endpoint gave only empty vectors".into());
        }
        this.inner
            .put_vectors(model, pairs)
            .await
            .map_err(|e| e.to_string())?;
        if !full {
            return Ok(());
        }
        let work = started.elapsed().saturating_sub(waited);
        tokio::time::sleep(work * (WORK_SHARE - 1)).await;
    }
}
