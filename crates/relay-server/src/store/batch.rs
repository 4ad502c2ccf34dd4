//! Group commit: the small writes of concurrent legs (quota admissions, refunds, open-mode counts)
//! gathered into one statement or transaction per round trip instead of one hand-off each. The
//! same task serves PostgreSQL's per-leg version reads for injection (`store::postgres::injection`).
//!
//! One task per kind of write takes everything queued while the previous batch ran (up to
//! `MAX_BATCH`), runs it as one batch, and answers each caller with its own result. Under light
//! load a batch holds one item and costs what the single statement did; under load the store sees
//! one round trip per batch. Exactness stays the store's: every backend decides each item with the
//! same conditional update as before, only sent together.

use std::future::Future;

use tokio::sync::{mpsc, oneshot};

use super::{Admission, StoreError, StoreResult};

/// The most items one batch holds; the rest wait for the next round trip.
pub const MAX_BATCH: usize = 64;

/// Items waiting for the batch task; beyond this, callers wait to queue.
const QUEUE: usize = 4 * MAX_BATCH;

type Job<T, R> = (T, oneshot::Sender<StoreResult<R>>);

/// The sending side of one batch task; the task ends when this is dropped.
pub struct Batcher<T, R> {
    jobs: mpsc::Sender<Job<T, R>>,
}

impl<T: Send + 'static, R: Send + 'static> Batcher<T, R> {
    /// Starts the task. `run` gets the items in arrival order and answers one result per item in
    /// the same order; when it fails, every caller of that batch gets its error.
    pub fn spawn<F, Fut>(run: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + 'static,
        Fut: Future<Output = StoreResult<Vec<R>>> + Send + 'static,
    {
        let (jobs, mut queued) = mpsc::channel::<Job<T, R>>(QUEUE);
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while queued.recv_many(&mut batch, MAX_BATCH).await > 0 {
                let (items, waiters): (Vec<T>, Vec<_>) = batch.drain(..).unzip();
                match run(items).await {
                    Ok(results) if results.len() == waiters.len() => {
                        for (waiter, result) in waiters.into_iter().zip(results) {
                            // A caller that went away needs no answer.
                            let _ = waiter.send(Ok(result));
                        }
                    }
                    Ok(_) => {
                        let e = StoreError::Internal(
                            "a batch answered the wrong number of items".into(),
                        );
                        answer_all(waiters, &e);
                    }
                    Err(e) => answer_all(waiters, &e),
                }
            }
        });
        Self { jobs }
    }

    /// Queues one item and waits for its own result.
    pub async fn submit(&self, item: T) -> StoreResult<R> {
        let (answer, answered) = oneshot::channel();
        self.jobs
            .send((item, answer))
            .await
            .map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }
}

fn answer_all<R>(waiters: Vec<oneshot::Sender<StoreResult<R>>>, e: &StoreError) {
    for waiter in waiters {
        let _ = waiter.send(Err(e.clone()));
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the store's batch task has stopped".into())
}

/// The batched writes of one backend: each leg's admission, refund, and open-mode count.
pub struct LegWrites {
    pub admit: Batcher<String, Admission>,
    pub refund: Batcher<String, ()>,
    pub open_leg: Batcher<(), ()>,
}

/// Answers a batch of admissions from how many units each user got: the first legs of a user in
/// the batch take that user's units, the rest are refused.
pub fn admissions(
    user_ids: &[String],
    granted: impl IntoIterator<Item = (String, i64)>,
) -> Vec<Admission> {
    let mut left: std::collections::HashMap<String, i64> = granted.into_iter().collect();
    user_ids
        .iter()
        .map(|id| match left.get_mut(id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                Admission::Admitted
            }
            _ => Admission::QuotaExceeded,
        })
        .collect()
}
