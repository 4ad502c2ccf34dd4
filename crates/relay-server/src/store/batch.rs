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
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::{Admission, StoreError, StoreResult};

/// The most items one batch holds; the rest wait for the next round trip.
pub const MAX_BATCH: usize = 64;

/// Items waiting for the batch task; beyond this, callers wait to queue.
const QUEUE: usize = 4 * MAX_BATCH;

type Job<T, R> = (T, oneshot::Sender<StoreResult<R>>);

type Run<T, R> = Arc<dyn Fn(Vec<T>) -> BoxFuture<'static, StoreResult<Vec<R>>> + Send + Sync>;

/// The sending side of one batch task; the task ends when this is dropped.
pub struct Batcher<T, R> {
    jobs: mpsc::Sender<Job<T, R>>,
    run: Run<T, R>,
    /// How many batches (queued or direct) are under way.
    busy: Arc<AtomicUsize>,
    /// Whether a caller that finds nothing under way and nothing queued runs its item itself.
    direct: bool,
}

impl<T: Send + 'static, R: Send + 'static> Batcher<T, R> {
    /// Starts the task. `run` gets the items in arrival order and answers one result per item in
    /// the same order; when it fails, every caller of that batch gets its error.
    pub fn spawn<F, Fut>(run: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StoreResult<Vec<R>>> + Send + 'static,
    {
        Self::start(run, false)
    }

    /// As `spawn`, but a caller that finds no batch under way and none queued runs its own item
    /// as a batch of one on its own task: under light load that saves the two task hand-offs of
    /// the queue (to the batch task and back); under load callers still queue and share round
    /// trips. For stores whose statements are exact whatever runs them side by side.
    pub fn spawn_direct<F, Fut>(run: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StoreResult<Vec<R>>> + Send + 'static,
    {
        Self::start(run, true)
    }

    fn start<F, Fut>(run: F, direct: bool) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StoreResult<Vec<R>>> + Send + 'static,
    {
        let run: Run<T, R> = Arc::new(move |items| run(items).boxed());
        let busy = Arc::new(AtomicUsize::new(0));
        let (jobs, mut queued) = mpsc::channel::<Job<T, R>>(QUEUE);
        let (task_run, task_busy) = (run.clone(), busy.clone());
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while queued.recv_many(&mut batch, MAX_BATCH).await > 0 {
                let (items, waiters): (Vec<T>, Vec<_>) = batch.drain(..).unzip();
                task_busy.fetch_add(1, Ordering::AcqRel);
                let outcome = task_run(items).await;
                task_busy.fetch_sub(1, Ordering::AcqRel);
                match outcome {
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
        Self {
            jobs,
            run,
            busy,
            direct,
        }
    }

    /// True when no item waits in the queue (a batch may still be running).
    pub fn queue_is_empty(&self) -> bool {
        self.jobs.capacity() == self.jobs.max_capacity()
    }

    /// Queues one item and waits for its own result (or, for a `spawn_direct` batcher with
    /// nothing under way, runs it at once).
    pub async fn submit(&self, item: T) -> StoreResult<R> {
        if self.direct
            && self.queue_is_empty()
            && let Some(claim) = Claim::take(&self.busy)
        {
            let result = (self.run)(vec![item]).await;
            drop(claim);
            return result?
                .pop()
                .ok_or_else(|| StoreError::Internal("a batch answered no item".into()));
        }
        let (answer, answered) = oneshot::channel();
        self.jobs
            .send((item, answer))
            .await
            .map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }
}

/// A direct run counted as under way: taken only when nothing else is, given back when the run
/// ends or its caller goes away.
struct Claim<'a>(&'a AtomicUsize);

impl<'a> Claim<'a> {
    fn take(busy: &'a AtomicUsize) -> Option<Self> {
        busy.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Self(busy))
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use tokio::sync::watch;

    use super::*;

    type Log = Arc<Mutex<Vec<(Option<tokio::task::Id>, Vec<u32>)>>>;

    /// A batcher whose runs record the task they ran on and their items, then wait until
    /// `released` says true.
    fn recording(direct: bool, released: watch::Receiver<bool>) -> (Arc<Batcher<u32, u32>>, Log) {
        let seen = Log::default();
        let log = seen.clone();
        let run = move |items: Vec<u32>| {
            let (log, mut released) = (log.clone(), released.clone());
            async move {
                if let Ok(mut log) = log.lock() {
                    log.push((tokio::task::try_id(), items.clone()));
                }
                let _ = released.wait_for(|r| *r).await;
                Ok(items.iter().map(|i| i * 10).collect())
            }
        };
        let batcher = if direct {
            Batcher::spawn_direct(run)
        } else {
            Batcher::spawn(run)
        };
        (Arc::new(batcher), seen)
    }

    fn submit(
        b: &Arc<Batcher<u32, u32>>,
        item: u32,
    ) -> tokio::task::JoinHandle<(tokio::task::Id, Option<u32>)> {
        let b = b.clone();
        tokio::spawn(async move { (tokio::task::id(), b.submit(item).await.ok()) })
    }

    /// Waits until `n` runs have started; a run that never starts fails the test instead of
    /// hanging it.
    async fn runs_logged(seen: &Log, n: usize) {
        let started = async {
            while seen.lock().unwrap().len() < n {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), started)
            .await
            .unwrap_or_else(|_| panic!("{n} runs did not start within 5 s"));
    }

    #[tokio::test]
    async fn an_idle_direct_batcher_runs_the_item_on_the_callers_task() {
        let (_release, released) = watch::channel(true);
        let (direct, seen) = recording(true, released.clone());
        let (caller, answer) = submit(&direct, 4).await.unwrap();
        assert_eq!(answer, Some(40));
        assert_eq!(*seen.lock().unwrap(), vec![(Some(caller), vec![4])]);

        // The plain batcher always hands the item to its own task.
        let (queued, seen) = recording(false, released);
        let (caller, answer) = submit(&queued, 5).await.unwrap();
        assert_eq!(answer, Some(50));
        let ran_on = seen.lock().unwrap()[0].0;
        assert!(ran_on.is_some() && ran_on != Some(caller));
    }

    #[tokio::test]
    async fn callers_queue_while_a_direct_run_is_under_way() {
        let (release, released) = watch::channel(false);
        let (batcher, seen) = recording(true, released);
        let first = submit(&batcher, 1);
        runs_logged(&seen, 1).await;
        let others: Vec<_> = (2..=4).map(|i| submit(&batcher, i)).collect();
        // The batch task picks up at least the first of the queued ones while the direct run
        // still waits.
        runs_logged(&seen, 2).await;
        release.send_replace(true);
        let (first_caller, answer) = first.await.unwrap();
        assert_eq!(answer, Some(10));
        let mut callers = vec![first_caller];
        for (i, other) in (2..=4).zip(others) {
            let (caller, answer) = tokio::time::timeout(Duration::from_secs(5), other)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(answer, Some(i * 10));
            callers.push(caller);
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0], (Some(first_caller), vec![1]));
        let queued: Vec<u32> = seen[1..]
            .iter()
            .flat_map(|(_, items)| items.clone())
            .collect();
        assert_eq!(queued, vec![2, 3, 4], "each queued item ran once, in order");
        for (task, _) in &seen[1..] {
            assert!(
                !callers.contains(&task.unwrap()),
                "queued items run on the batch task"
            );
        }
    }

    #[tokio::test]
    async fn a_direct_caller_that_goes_away_leaves_the_batcher_usable() {
        let (release, released) = watch::channel(false);
        let (batcher, seen) = recording(true, released);
        let abandoned = submit(&batcher, 1);
        runs_logged(&seen, 1).await;
        abandoned.abort();
        let _ = abandoned.await;
        release.send_replace(true);
        // Nothing is under way any more: the next caller runs directly again.
        let (caller, answer) = submit(&batcher, 7).await.unwrap();
        assert_eq!(answer, Some(70));
        assert_eq!(seen.lock().unwrap()[1], (Some(caller), vec![7]));
    }
}
