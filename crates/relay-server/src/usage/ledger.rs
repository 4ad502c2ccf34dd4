//! Writing the ledger off the leg's path: a leg hands its record to a bounded channel and goes on;
//! one background task writes the records in batches (every `batch_size` records or `flush_ms`
//! after a batch's first record), and another prunes records past `retention_days`.
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

/// Tries of one batch before it is given up (logged with its size).
const TRIES: u32 = 3;

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

    pub fn prices(&self) -> &PriceList {
        &self.prices
    }

    pub fn store(&self) -> &Arc<dyn UsageStore> {
        &self.store
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

    /// Queues a leg's record; never waits.
    /// With the ledger off only `relay_cost_usd_total` counts it: the record is not stored.
    pub fn record(&self, record: LegRecord) {
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
        write(store.as_ref(), &mut batch).await;
    }
    // Shutdown: what is queued is written before the process exits.
    queued.close();
    while let Some(r) = queued.recv().await {
        batch.push(r);
        if batch.len() >= size {
            write(store.as_ref(), &mut batch).await;
        }
    }
    write(store.as_ref(), &mut batch).await;
}

async fn write(store: &dyn UsageStore, batch: &mut Vec<LegRecord>) {
    if batch.is_empty() {
        return;
    }
    for attempt in 1..=TRIES {
        match store.insert_legs(batch).await {
            Ok(()) => break,
            Err(e) if attempt < TRIES => {
                tracing::warn!(error = %e, attempt, "could not write usage records; retrying");
                tokio::time::sleep(Duration::from_millis(250) * attempt).await;
            }
            Err(e) => {
                tracing::error!(error = %e, records = batch.len(), "usage records lost: the store refused them");
            }
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
