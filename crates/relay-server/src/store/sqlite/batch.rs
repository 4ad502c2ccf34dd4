//! SQLite's side of group commit (see `store::batch`).
//!
//! sqlx runs every statement on the connection's worker thread, one hand-off each, so a batch
//! inside an ordinary transaction would still cost a hand-off per leg plus two. Instead a batch is
//! one script — `BEGIN IMMEDIATE`, the same conditional `UPDATE` once per leg, `COMMIT` — sent as
//! one query: one hand-off and one commit for the whole batch, and each leg still decided by its
//! own statement, so a user with one unit left and two legs in the batch gets exactly one.
//!
//! Several statements with bound parameters in one query is a SQLite-only sqlx feature that sqlx
//! calls deprecated on `Query` (issue launchbadge/sqlx#3108) but still runs through `Executor`;
//! `raw_sql` takes no parameters. If a later sqlx drops it, this file goes back to one statement
//! per leg inside one transaction.
//!
//! Before that script, a batch of admissions or refunds is tried inline, on a rusqlite connection
//! of its own that never waits for a lock (`Inline`): the same statements in one `BEGIN
//! IMMEDIATE` transaction, on the batch task's thread, with no hand-off at all. The hand-off to
//! sqlx's worker and back was 13 % of Relay's CPU samples at 1,000 legs/s. When another
//! connection holds the write lock (a remember batch, another process), the batch takes the sqlx
//! script above, which waits for it on the worker thread instead of on the runtime's.
//!
//! Under light load a leg does not queue at all (`QuotaWrites`): when nothing is queued and the
//! inline connection is free, it runs its own statement there, on its own task, which saves the
//! two task hand-offs of the queue. That attempt never awaits, so a leg cancelled half-way (its
//! client left) cannot leave a transaction open; when it cannot run at once, the leg queues.
//!
//! The same connection writes the usage ledger's batches (`ledger`, on a blocking thread, in
//! chunks of a few dozen records) and a leg's budget reservation: SQLite has one writer at a time
//! per file, and sharing this connection's mutex makes a leg that comes during a ledger chunk wait
//! that chunk's fraction of a millisecond instead of sleeping in SQLite's busy handler (1, 2,
//! 5, 10 ms …), which at 1,000 legs/s had put a ledger batch into the legs' p99 (issue 39).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use rusqlite::{ErrorCode, TransactionBehavior};
use sqlx::sqlite::SqlitePool;
use sqlx::{Connection, Either, Executor};

use crate::store::batch::{Batcher, LegWrites, MAX_BATCH};
use crate::store::usage::LegRecord;
use crate::store::usage_rows::BatchRows;
use crate::store::{Admission, StoreError, StoreResult};

/// How long a ledger batch waits before trying again when another connection holds the lock.
const LEDGER_RETRY: Duration = Duration::from_millis(2);

/// Takes one unit when one is left; a row back means it did.
const ADMIT: &str = "UPDATE users SET used = used + 1
     WHERE id = ? AND (role = 'admin' OR quota_limit < 0 OR used < quota_limit) RETURNING 1;";

/// Gives one unit back, never below zero.
const REFUND: &str = "UPDATE users SET used = used - 1 WHERE id = ? AND used > 0 RETURNING 1;";

/// The scripts for one per-leg statement, for each padded batch size (1, 2, 4, … `MAX_BATCH`):
/// a handful of texts, so sqlx's statement cache keeps each one prepared.
struct Scripts {
    statement: &'static str,
    by_size: Vec<(usize, Arc<str>)>,
}

impl Scripts {
    fn new(statement: &'static str) -> Self {
        let mut by_size = vec![(1, Arc::from(statement))];
        let mut size = 2;
        while size <= MAX_BATCH {
            let mut script = String::from("BEGIN IMMEDIATE;\n");
            for _ in 0..size {
                script.push_str(statement);
                script.push('\n');
            }
            script.push_str("COMMIT;");
            by_size.push((size, Arc::from(script)));
            size *= 2;
        }
        Self { statement, by_size }
    }

    /// The smallest script that holds `n` legs.
    fn fitting(&self, n: usize) -> StoreResult<(usize, Arc<str>)> {
        self.by_size
            .iter()
            .find(|(size, _)| *size >= n)
            .cloned()
            .ok_or_else(|| StoreError::Internal(format!("a batch of {n} for `{}`", self.statement)))
    }

    /// Runs the statement once per id, in order, in one transaction and one hand-off; true for
    /// each that took effect. Padding legs bind NULL, which matches no row.
    async fn run(&self, pool: &SqlitePool, ids: &[String]) -> StoreResult<Vec<bool>> {
        let (size, script) = self.fitting(ids.len())?;
        let mut query = sqlx::query(sqlx::AssertSqlSafe(script));
        for i in 0..size {
            query = query.bind(ids.get(i).map(String::as_str));
        }
        let mut conn = pool.acquire().await?;
        let mut done = Vec::with_capacity(size + 2);
        let mut took = false;
        let outcome = {
            let mut results = (&mut *conn).fetch_many(query);
            loop {
                match results.try_next().await {
                    Ok(Some(Either::Right(_row))) => took = true,
                    Ok(Some(Either::Left(_finished))) => {
                        done.push(took);
                        took = false;
                    }
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                }
            }
        };
        if let Err(e) = outcome {
            // The script may have stopped inside its transaction; a connection in that state must
            // not go back to the pool. Closing it rolls the transaction back.
            let _ = conn.detach().close().await;
            return Err(e.into());
        }
        // One result per statement: BEGIN, the legs, COMMIT (a lone statement has neither).
        let first = usize::from(size > 1);
        done.get(first..first + ids.len())
            .map(<[bool]>::to_vec)
            .ok_or_else(|| StoreError::Internal("a batch script ended early".into()))
    }
}

/// The leg writes' own connection, run on the calling thread and never waiting for a lock.
struct Inline {
    conn: Mutex<rusqlite::Connection>,
}

impl Inline {
    fn open(path: &Path) -> anyhow::Result<Self> {
        let conn = super::side_connection(
            path,
            "quota writes",
            rusqlite::OpenFlags::default(),
            |conn| {
                conn.busy_timeout(std::time::Duration::ZERO)?;
                conn.pragma_update(None, "synchronous", "NORMAL")?;
                // Its commits never checkpoint: a checkpoint inside a commit would hold the
                // runtime's thread for milliseconds. The background task and the other
                // connections' safety net (`checkpoint`) keep the log short.
                conn.pragma_update(None, "wal_autocheckpoint", 0)
            },
        )?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    /// `statement` once per id, in order, in one transaction; true for each that took effect.
    /// `None` when the write lock is busy (or, with `Wait::No`, this connection is): nothing was
    /// written, and the caller goes another way. Every holder of this connection keeps it for
    /// one short transaction, so a batch waits for it rather than take the sqlx path, whose busy
    /// handler would sleep for a lock this connection holds.
    fn run(&self, statement: &str, ids: &[String], wait: Wait) -> Option<StoreResult<Vec<bool>>> {
        self.transaction(wait, |tx| {
            let mut stmt = tx.prepare_cached(statement)?;
            ids.iter()
                .map(|id| stmt.query([id])?.next().map(|row| row.is_some()))
                .collect::<rusqlite::Result<Vec<bool>>>()
        })
    }

    /// `work` in one IMMEDIATE transaction on this connection, committed when it succeeds;
    /// `None` as for `run`.
    fn transaction<R>(
        &self,
        wait: Wait,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<R>,
    ) -> Option<StoreResult<R>> {
        let mut conn = match wait {
            Wait::Yes => self.conn.lock().ok()?,
            Wait::No => self.conn.try_lock().ok()?,
        };
        let outcome = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let done = work(&tx)?;
            // Dropped without a commit (an error above), the transaction rolls back.
            tx.commit()?;
            Ok(done)
        })();
        match outcome {
            Ok(done) => Some(Ok(done)),
            Err(rusqlite::Error::SqliteFailure(f, _))
                if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) =>
            {
                None
            }
            Err(e) => Some(Err(StoreError::Unavailable(e.to_string()))),
        }
    }
}

/// Whether `Inline::run` waits for its connection when another caller holds it.
#[derive(Clone, Copy)]
enum Wait {
    Yes,
    No,
}

/// Runs one batch inline when it can, through sqlx otherwise.
async fn run_batch(
    inline: &Inline,
    scripts: &Scripts,
    pool: &SqlitePool,
    ids: &[String],
) -> StoreResult<Vec<bool>> {
    match inline.run(scripts.statement, ids, Wait::Yes) {
        Some(done) => done,
        None => scripts.run(pool, ids).await,
    }
}

/// The SQLite store's per-leg quota writes: at once on the leg's own task when the store is
/// idle, through the batch queue otherwise.
pub(super) struct QuotaWrites {
    inline: Arc<Inline>,
    pub batched: LegWrites,
    /// How long a ledger batch keeps trying while another connection holds the write lock.
    busy: Duration,
}

impl QuotaWrites {
    pub async fn admit(&self, user_id: &str) -> StoreResult<Admission> {
        match self.at_once(ADMIT, &self.batched.admit, user_id) {
            Some(Ok(true)) => Ok(Admission::Admitted),
            Some(Ok(false)) => Ok(Admission::QuotaExceeded),
            Some(Err(e)) => Err(e),
            None => self.batched.admit.submit(user_id.to_owned()).await,
        }
    }

    pub async fn refund(&self, user_id: &str) -> StoreResult<()> {
        match self.at_once(REFUND, &self.batched.refund, user_id) {
            Some(done) => done.map(drop),
            None => self.batched.refund.submit(user_id.to_owned()).await,
        }
    }

    /// Writes a batch of ledger records on the inline connection, on a blocking thread: the
    /// batch is short (`ledger`), and a leg that comes meanwhile waits for this connection's
    /// mutex, not in SQLite's busy handler. While another connection (a remember batch, another
    /// process) holds the write lock, the batch steps back and tries again a little later, up to
    /// the busy timeout: a leg's write is never queued behind it.
    pub async fn ledger(&self, records: Vec<LegRecord>) -> StoreResult<BatchRows> {
        let records = Arc::new(records);
        let deadline = Instant::now() + self.busy;
        loop {
            let (inline, batch) = (self.inline.clone(), records.clone());
            let done = tokio::task::spawn_blocking(move || {
                inline.transaction(Wait::Yes, |tx| super::ledger::write(tx, &batch))
            })
            .await
            .map_err(|e| StoreError::Internal(format!("the ledger's writer stopped: {e}")))?;
            match done {
                Some(done) => return done,
                None if Instant::now() < deadline => {
                    tokio::time::sleep(LEDGER_RETRY).await;
                }
                None => {
                    return Err(StoreError::Unavailable(
                        "the database stayed locked past the busy timeout".into(),
                    ));
                }
            }
        }
    }

    /// `work` in one transaction on the inline connection, at once on the caller's thread
    /// (waiting for the connection's mutex if a batch holds it: one short transaction); `None`
    /// when another connection holds the write lock.
    pub fn transaction<R>(
        &self,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<R>,
    ) -> Option<StoreResult<R>> {
        self.inline.transaction(Wait::Yes, work)
    }

    /// `statement` for one leg on the inline connection, if nothing waits in `queue` (a leg
    /// does not overtake queued ones) and the connection is free; `None` means queue it.
    fn at_once<R: Send + 'static>(
        &self,
        statement: &str,
        queue: &Batcher<String, R>,
        user_id: &str,
    ) -> Option<StoreResult<bool>> {
        if !queue.queue_is_empty() {
            return None;
        }
        let done = self
            .inline
            .run(statement, &[user_id.to_owned()], Wait::No)?;
        Some(done.map(|took| took.first() == Some(&true)))
    }
}

/// Starts the batch tasks of one SQLite pool; `path` is its database file.
pub(super) fn leg_writes(
    pool: &SqlitePool,
    path: &Path,
    busy: Duration,
) -> anyhow::Result<QuotaWrites> {
    let inline = Arc::new(Inline::open(path)?);
    let at_once = inline.clone();
    let admit = Arc::new(Scripts::new(ADMIT));
    let refund = Arc::new(Scripts::new(REFUND));
    let (p1, p2, p3) = (pool.clone(), pool.clone(), pool.clone());
    let (i1, i2) = (inline.clone(), inline);
    let batched = LegWrites {
        admit: Batcher::spawn(move |ids: Vec<String>| {
            let (pool, scripts, inline) = (p1.clone(), admit.clone(), i1.clone());
            async move {
                Ok(run_batch(&inline, &scripts, &pool, &ids)
                    .await?
                    .into_iter()
                    .map(|took| {
                        if took {
                            Admission::Admitted
                        } else {
                            Admission::QuotaExceeded
                        }
                    })
                    .collect())
            }
        }),
        refund: Batcher::spawn(move |ids: Vec<String>| {
            let (pool, scripts, inline) = (p2.clone(), refund.clone(), i2.clone());
            async move {
                Ok(vec![
                    ();
                    run_batch(&inline, &scripts, &pool, &ids).await?.len()
                ])
            }
        }),
        open_leg: Batcher::spawn(move |legs: Vec<()>| {
            let pool = p3.clone();
            async move {
                sqlx::query("UPDATE open_usage SET used = used + ? WHERE id = 1")
                    .bind(i64::try_from(legs.len()).unwrap_or(i64::MAX))
                    .execute(&pool)
                    .await?;
                Ok(legs)
            }
        }),
    };
    Ok(QuotaWrites {
        inline: at_once,
        batched,
        busy,
    })
}
