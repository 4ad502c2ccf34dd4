//! Limits shared by every instance through Redis (`[limits] url`).
//!
//! Each decision is one Lua script run on the server (no read-then-write), with Redis' own clock,
//! so instances agree whatever their clocks say. A decision Redis does not answer within
//! `DEADLINE` is counted in `relay_limits_store_errors_total` and made by the instance's own
//! counters instead; after a failure Redis is left alone for `RETRY_AFTER`, then tried again, so
//! the service goes back to shared limits by itself when Redis is back.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// How long a request waits for Redis before deciding locally.
const DEADLINE: Duration = Duration::from_millis(250);
/// How long Redis is skipped after a failure.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// GCRA (the algorithm governor uses locally): the key holds the theoretical arrival time in ms.
/// ARGV: emission interval (ms), burst. Returns -1 when allowed, else the wait in ms.
const RATE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tau = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + interval
if new_tat - now > tau then
  return new_tat - tau - now
end
redis.call('SET', KEYS[1], new_tat, 'PX', new_tat - now)
return -1
";

/// A place in the failure budget of every key, or the wait: each key is a sorted set of its
/// recent failures (score: time in ms). ARGV: budget, window (ms), this attempt's member.
/// Returns -1 when reserved, else the wait in ms.
const RESERVE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local budget = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local wait = -1
for _, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if redis.call('ZCARD', key) >= budget then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local w = tonumber(oldest[2]) + window - now
    if w > wait then wait = w end
  end
end
if wait >= 0 then return wait end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, window)
end
return -1
";

/// Gives a reserved place back (the password was right).
const RELEASE: &str = r"
for _, key in ipairs(KEYS) do redis.call('ZREM', key, ARGV[1]) end
return 0
";

/// Forgets a key's failures up to a time (ms): an operator lifted its lock.
const FORGIVE: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return 0
";

/// The connection to Redis and the scripts; shared by every limit of an instance.
pub struct SharedStore {
    conn: ConnectionManager,
    prefix: String,
    rate: redis::Script,
    reserve: redis::Script,
    release: redis::Script,
    forgive: redis::Script,
    skip_until: Mutex<Option<Instant>>,
    errors: Counter,
}

/// Seconds to wait, as the per-instance limits report it (whole seconds, rounded up, at least 1).
pub fn wait_secs(wait_ms: i64) -> u64 {
    u64::try_from(wait_ms).unwrap_or(0) / 1000 + 1
}

impl SharedStore {
    /// Prepares the connection (made on first use, so an instance starts while Redis is down).
    /// The password comes from the URL or, failing that, `password`  (`REDIS_PASSWORD`).
    pub fn open(
        url: &str,
        prefix: &str,
        password: Option<String>,
        errors: Counter,
    ) -> anyhow::Result<Self> {
        let mut info = redis::IntoConnectionInfo::into_connection_info(url)
            .map_err(|e| anyhow::anyhow!("limits.url: not a redis:// or rediss:// URL: {e}"))?;
        if info.redis_settings().password().is_none()
            && let Some(password) = password
        {
            let settings = info.redis_settings().clone().set_password(password);
            info = info.set_redis_settings(settings);
        }
        let client = redis::Client::open(info)
            .map_err(|e| anyhow::anyhow!("limits.url: cannot use this Redis URL: {e}"))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(DEADLINE))
            .set_response_timeout(Some(DEADLINE))
            .set_number_of_retries(1)
            .set_max_delay(RETRY_AFTER);
        let conn = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| anyhow::anyhow!("limits.url: {e}"))?;
        Ok(Self {
            conn,
            prefix: prefix.to_owned(),
            rate: redis::Script::new(RATE),
            reserve: redis::Script::new(RESERVE),
            release: redis::Script::new(RELEASE),
            forgive: redis::Script::new(FORGIVE),
            skip_until: Mutex::new(None),
            errors,
        })
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut key = self.prefix.clone();
        for p in parts {
            key.push(':');
            key.push_str(p);
        }
        key
    }

    /// True while Redis is being skipped after a failure.
    pub fn degraded(&self) -> bool {
        self.skip_until
            .lock()
            .ok()
            .and_then(|g| *g)
            .is_some_and(|until| Instant::now() < until)
    }

    /// Runs one script within the deadline; `None` (counted) when Redis is skipped, slow or failing.
    async fn run(&self, invocation: &redis::ScriptInvocation<'_>) -> Option<i64> {
        if self.degraded() {
            self.errors.inc();
            return None;
        }
        let mut conn = self.conn.clone();
        let outcome =
            tokio::time::timeout(DEADLINE, invocation.invoke_async::<i64>(&mut conn)).await;
        match outcome {
            Ok(Ok(v)) => Some(v),
            failed => {
                let reason = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("no answer within {} ms", DEADLINE.as_millis()),
                };
                let first = !self.degraded();
                if let Ok(mut g) = self.skip_until.lock() {
                    *g = Some(Instant::now() + RETRY_AFTER);
                }
                self.errors.inc();
                if first {
                    tracing::warn!(error = %reason, "Redis limits store failed; using this instance's own limits");
                }
                None
            }
        }
    }

    /// One cell of `key`'s GCRA budget for `limit`: `Some(Ok)` allowed, `Some(Err(wait_ms))`
    /// refused, `None` undecided (decide locally).
    pub async fn rate(
        &self,
        limit: &str,
        key: &str,
        interval: Duration,
        burst: u32,
    ) -> Option<Result<(), i64>> {
        let interval_ms = u64::try_from(interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut invocation = self.rate.key(self.key(&["rate", limit, key]));
        invocation.arg(interval_ms).arg(burst.max(1));
        let v = self.run(&invocation).await?;
        Some(if v < 0 { Ok(()) } else { Err(v) })
    }

    /// A place in the failure budget of every key: `Some(Ok(member))` reserved (give it back with
    /// `release`), `Some(Err(wait_ms))` refused, `None` undecided.
    pub async fn reserve(
        &self,
        keys: &[String],
        budget: u32,
        window: Duration,
    ) -> Option<Result<String, i64>> {
        let member = hex::encode(rand::random::<[u8; 12]>());
        let mut invocation = self.reserve.prepare_invoke();
        for k in keys {
            invocation.key(self.key(&["signin", k]));
        }
        invocation
            .arg(budget.max(1))
            .arg(u64::try_from(window.as_millis()).unwrap_or(u64::MAX))
            .arg(&member);
        let v = self.run(&invocation).await?;
        Some(if v < 0 { Ok(member) } else { Err(v) })
    }

    /// Gives back a place `reserve` took.
    pub async fn release(&self, keys: &[String], member: &str) {
        let mut invocation = self.release.prepare_invoke();
        for k in keys {
            invocation.key(self.key(&["signin", k]));
        }
        invocation.arg(member);
        if self.run(&invocation).await.is_none() {
            tracing::warn!("could not give a sign-in failure place back to Redis");
        }
    }

    /// Forgets `key`'s failures at or before `until_ms` (Unix ms): its lock was lifted.
    pub async fn forgive(&self, key: &str, until_ms: i64) {
        let mut invocation = self.forgive.key(self.key(&["signin", key]));
        invocation.arg(until_ms);
        if self.run(&invocation).await.is_none() {
            tracing::warn!("could not lift a sign-in lock in Redis");
        }
    }

    /// For `/readyz`: a round trip within the deadline.
    pub async fn ping(&self) -> Result<(), String> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("PING");
        match tokio::time::timeout(DEADLINE, cmd.query_async::<String>(&mut conn)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err("Redis refused or dropped the connection".to_owned()),
            Err(_) => Err(format!(
                "Redis gave no answer within {} ms",
                DEADLINE.as_millis()
            )),
        }
    }
}
