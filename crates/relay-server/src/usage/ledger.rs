//! Writing the ledger off the leg's path: a leg hands its record to a bounded channel and goes on;
//! one background task writes the records in batches (every `batch_size` records or `flush_ms`
//! after a batch's first record), and another prunes records past `retention_days`.
//!
//! A batch goes to the store in chunks of `CHUNK` records, each its own short transaction, with
//! the runtime given back between them: a store holds its write lock (SQLite) or its rows
//! (PostgreSQL) for one chunk at a time, so a leg's quota write or budget reservation that comes
//! meanwhile waits for a chunk at most, never for a whole batch (issue 39). Each chunk counts its
//! records' tokens and settles their reservations in its own transaction, so the month's count
//! that budgets read stays exact at every moment.
//!
//! A crash loses the batch being gathered (at most `batch_size` records, at most `flush_ms` old);
//! a shutdown (`close`) writes everything queued first.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::PriceList;
use crate::config::UsageConfig;
use crate::metrics::registry::Metrics;
use crate::store::StoreResult;
use crate::store::usage::{LegRecord, UsageStore};

/// Records waiting for the writer; past this a record is dropped (and logged) rather than
/// holding a leg up.
const QUEUE: usize = 16_384;

/// How often old records are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Tries of one chunk before it is given up (logged with its size).
const TRIES: u32 = 3;

/// Records per transaction: on SQLite about 0.1 ms of holding the write lock in a release build.
const CHUNK: usize = 32;

/// The ledger's sending side and its background tasks.
pub struct Ledger {
    records: mpsc::Sender<LegRecord>,
    store: Arc<dyn UsageStore>,
    prices: PriceList,
    metrics: Arc<Metrics>,
    retention_days: u32,
    /// `[usage] ledger`: off, no leg is recorded (what is stored is still served and pruned).
    recording: bool,
    stop: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Ledger {
    /// Starts the writer and the pruner over `store`.
    pub fn start(
        store: Arc<dyn UsageStore>,
        config: &UsageConfig,
        prices: PriceList,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (records, queued) = mpsc::channel(QUEUE);
        let stop = CancellationToken::new();
        let writer = tokio::spawn(write_batches(
            store.clone(),
            queued,
            config.batch_size,
            Duration::from_millis(config.flush_ms),
            stop.clone(),
        ));
        let ledger = Self {
            records,
            store,
            prices,
            metrics,
            retention_days: config.retention_days,
            recording: config.ledger,
            stop,
            tasks: Mutex::new(vec![writer]),
        };
        let pruner = tokio::spawn(prune_periodically(
            ledger.store.clone(),
            ledger.retention_days,
            ledger.stop.clone(),
        ));
        if let Ok(mut tasks) = ledger.tasks.lock() {
            tasks.push(pruner);
        }
        ledger
    }

    pub fn store(&self) -> &Arc<dyn UsageStore> {
        &self.store
    }

    /// The configured prices of `model`; `None` when it names none.
    pub fn price_of(&self, model: &str) -> Option<super::Prices> {
        self.prices.get(model).copied()
    }

    /// Queues the record of a leg that ended with `status` on `model`, priced from its prices.
    pub fn leg_ended(
        &self,
        facts: &super::LegFacts,
        model: &crate::providers::registry::ModelEntry,
        status: &'static str,
        usage: Option<&crate::providers::Usage>,
        estimated: bool,
    ) {
        let prices = self
            .prices
            .get(&model.name)
            .map(|p| p.scaled(model.policy.tier_multiplier(facts.service_tier.as_deref())));
        let mut record = facts.record(
            &model.name,
            &model.provider_name,
            status,
            usage,
            prices.as_ref(),
        );
        record.estimated = estimated;
        self.record(record);
    }

    /// Queues a leg's record; never waits. A token figure past `store::usage::MAX_TOKENS` is
    /// clamped (and logged with the request id).
    /// With the ledger off only `relay_cost_usd_total` counts it: the record is not stored.
    pub fn record(&self, mut record: LegRecord) {
        if record.clamp() {
            tracing::warn!(
                request_id = %record.request_id,
                model = %record.model,
                "a usage record held a token figure past the ledger's maximum; clamped"
            );
        }
        if let Some(cost) = record.cost_usd {
            self.metrics
                .cost_usd
                .get_or_create(&crate::metrics::ModelLabels {
                    model: record.model.clone(),
                })
                .inc_by(cost);
        }
        if !self.recording {
            self.release(record.reservation);
            return;
        }
        if let Err(e) = self.records.try_send(record) {
            tracing::error!(error = %e, "the usage ledger's queue is full or closed: a leg's record is lost");
        }
    }

    /// Drops a budget reservation whose leg leaves no record (it failed before any output, or
    /// it was refunded and the provider reported nothing); off the caller's path.
    pub fn release(&self, reservation: Option<String>) {
        let Some(id) = reservation else { return };
        let store = self.store.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = store.release(&id).await {
                    // It expires by itself (`budget::RESERVATION_TTL_SECS`).
                    tracing::warn!(error = %e, "could not release a budget reservation");
                }
            });
        }
    }

    /// Prunes records older than the retention now (the pruner does this hourly); how many went.
    pub async fn prune_now(&self) -> StoreResult<u64> {
        self.store.prune(cutoff(self.retention_days)).await
    }

    /// Writes everything queued and stops the tasks; for shutdown.
    pub async fn close(&self) {
        self.stop.cancel();
        let tasks = self
            .tasks
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default();
        for task in tasks {
            let _ = task.await;
        }
    }
}

fn cutoff(retention_days: u32) -> i64 {
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let now = crate::clock::now() as i64;
    now - i64::from(retention_days) * 86_400
}

async fn write_batches(
    store: Arc<dyn UsageStore>,
    mut queued: mpsc::Receiver<LegRecord>,
    size: usize,
    flush: Duration,
    stop: CancellationToken,
) {
    let mut batch = Vec::with_capacity(size);
    loop {
        let first = tokio::select! {
            r = queued.recv() => r,
            () = stop.cancelled() => None,
        };
        let Some(first) = first else { break };
        batch.push(first);
        let deadline = tokio::time::Instant::now() + flush;
        while batch.len() < size {
            tokio::select! {
                r = queued.recv() => match r {
                    Some(r) => batch.push(r),
                    None => break,
                },
                () = tokio::time::sleep_until(deadline) => break,
                () = stop.cancelled() => break,
            }
        }
        write_chunked(store.as_ref(), &mut batch).await;
    }
    // Shutdown: what is queued is written before the process exits.
    queued.close();
    while let Some(r) = queued.recv().await {
        batch.push(r);
        if batch.len() >= size {
            write_chunked(store.as_ref(), &mut batch).await;
        }
    }
    write_chunked(store.as_ref(), &mut batch).await;
}

/// Writes a batch `CHUNK` records at a time, yielding between chunks so that the legs' own
/// store writes queued meanwhile run first.
async fn write_chunked(store: &dyn UsageStore, batch: &mut Vec<LegRecord>) {
    let mut rest = std::mem::take(batch);
    while !rest.is_empty() {
        let tail = rest.split_off(rest.len().min(CHUNK));
        write(store, &mut rest).await;
        rest = tail;
        tokio::task::yield_now().await;
    }
}

/// Writes a chunk, retrying it as a whole (the store may be briefly away); if it still fails and
/// holds more than one record, each record alone, so that one the store refuses loses only itself.
async fn write(store: &dyn UsageStore, batch: &mut Vec<LegRecord>) {
    if batch.is_empty() {
        return;
    }
    for attempt in 1..=TRIES {
        match store.insert_legs(batch).await {
            Ok(()) => {
                batch.clear();
                return;
            }
            Err(e) if attempt < TRIES => {
                tracing::warn!(error = %e, attempt, "could not write usage records; retrying");
                tokio::time::sleep(Duration::from_millis(250) * attempt).await;
            }
            Err(e) if batch.len() == 1 => {
                tracing::error!(error = %e, request_id = %batch[0].request_id, "a usage record lost: the store refused it");
            }
            Err(e) => {
                tracing::warn!(error = %e, records = batch.len(), "the store refused a batch of usage records; writing them one by one");
            }
        }
    }
    if batch.len() > 1 {
        let mut lost = 0_usize;
        for record in batch.iter() {
            if let Err(e) = store.insert_legs(std::slice::from_ref(record)).await {
                lost += 1;
                tracing::error!(error = %e, request_id = %record.request_id, "a usage record lost: the store refused it");
            }
        }
        if lost > 0 {
            tracing::error!(
                records = lost,
                of = batch.len(),
                "usage records lost: the store refused them one by one"
            );
        }
    }
    batch.clear();
}

async fn prune_periodically(
    store: Arc<dyn UsageStore>,
    retention_days: u32,
    stop: CancellationToken,
) {
    let mut every = tokio::time::interval(PRUNE_EVERY);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = stop.cancelled() => return,
        }
        match store.prune(cutoff(retention_days)).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(records = n, "pruned usage records past the retention"),
            Err(e) => tracing::warn!(error = %e, "could not prune usage records"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use crate::store::StoreError;
    use crate::store::usage::{LegFilter, StoredLeg, UsageQuery, UsageSums};

    /// A test double of the store that refuses any batch holding a record with the request id
    /// `bad` (as a store refuses a value it cannot hold), and keeps the request ids it wrote.
    #[derive(Default)]
    struct Picky {
        written: Mutex<Vec<String>>,
        calls: Mutex<usize>,
    }

    #[async_trait]
    impl UsageStore for Picky {
        async fn insert_legs(&self, records: &[LegRecord]) -> StoreResult<()> {
            *self.calls.lock().unwrap() += 1;
            if records.iter().any(|r| r.request_id == "bad") {
                return Err(StoreError::Unstorable("refused".into()));
            }
            let mut written = self.written.lock().unwrap();
            written.extend(records.iter().map(|r| r.request_id.clone()));
            Ok(())
        }
        async fn aggregate(&self, _: &UsageQuery) -> StoreResult<Vec<UsageSums>> {
            Ok(Vec::new())
        }
        async fn legs(&self, _: &LegFilter, _: Option<i64>, _: u32) -> StoreResult<Vec<StoredLeg>> {
            Ok(Vec::new())
        }
        async fn budget_and_month(&self, _: &str, _: i64) -> StoreResult<(Option<i64>, i64)> {
            Ok((None, 0))
        }
        async fn set_budget(&self, _: &str, _: i64) -> StoreResult<()> {
            Ok(())
        }
        async fn set_spend_budget(&self, _: &str, _: f64) -> StoreResult<()> {
            Ok(())
        }
        async fn delete_user_legs(&self, _: &str, _: bool) -> StoreResult<u64> {
            Ok(0)
        }
        async fn prune(&self, _: i64) -> StoreResult<u64> {
            Ok(0)
        }
        async fn month_state(
            &self,
            _: &str,
            _: i64,
            _: i64,
        ) -> StoreResult<crate::store::usage::MonthState> {
            Ok(crate::store::usage::MonthState::default())
        }
        async fn reserve(
            &self,
            _: &crate::store::usage::Reservation,
            _: crate::store::usage::Budgets,
            _: i64,
        ) -> StoreResult<bool> {
            Ok(true)
        }
        async fn release(&self, _: &str) -> StoreResult<()> {
            Ok(())
        }
        async fn setting_or_init(&self, _: &str, value: &str) -> StoreResult<String> {
            Ok(value.to_owned())
        }
    }

    fn record(request_id: &str) -> LegRecord {
        LegRecord {
            user_id: "u".into(),
            request_id: request_id.into(),
            at: 0,
            route: crate::domain::Door::Agent,
            model: "m".into(),
            provider: "p".into(),
            project_id: None,
            status: "ok",
            input_tokens: 1,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
            output_tokens: 1,
            reasoning_tokens: 0,
            ttfb_ms: 0,
            duration_ms: 0,
            cost_usd: None,
            reservation: None,
            estimated: false,
            server_tool_uses: 0,
        }
    }

    #[tokio::test]
    async fn a_record_the_store_refuses_loses_only_itself() {
        let store = Picky::default();
        let mut batch = vec![record("a"), record("bad"), record("b")];
        write(&store, &mut batch).await;
        assert!(batch.is_empty());
        assert_eq!(*store.written.lock().unwrap(), ["a", "b"]);
        // The batch three times, then each record once.
        assert_eq!(*store.calls.lock().unwrap(), TRIES as usize + 3);
    }

    #[tokio::test]
    async fn a_batch_goes_to_the_store_in_short_chunks() {
        let store = Picky::default();
        let mut batch: Vec<_> = (0..2 * CHUNK + 6).map(|i| record(&i.to_string())).collect();
        write_chunked(&store, &mut batch).await;
        assert!(batch.is_empty());
        let written = store.written.lock().unwrap().clone();
        let expected: Vec<_> = (0..2 * CHUNK + 6).map(|i| i.to_string()).collect();
        assert_eq!(written, expected, "every record once, in order");
        assert_eq!(*store.calls.lock().unwrap(), 3);
    }

    #[test]
    fn a_record_is_clamped_to_the_ledgers_maximum() {
        let mut r = record("x");
        r.input_tokens = i64::MAX;
        r.output_tokens = -5;
        r.cost_usd = Some(f64::INFINITY);
        assert!(r.clamp());
        assert_eq!(
            (r.input_tokens, r.output_tokens, r.cost_usd),
            (crate::store::usage::MAX_TOKENS, 0, None)
        );
        assert!(!r.clamp(), "a clamped record stays as it is");
        assert_eq!(
            crate::store::usage::clamp_tokens(u64::MAX),
            crate::store::usage::MAX_TOKENS
        );
        assert_eq!(crate::store::usage::clamp_tokens(12), 12);
    }
}
