//! Password hashing with Argon2id on a small pool of its own threads.
//!
//! Each hash holds `argon2_memory_kib` (19 MiB by default) while it runs, and the allocator keeps
//! what a thread used. So hashing runs on at most `workers()` dedicated threads (not the blocking
//! pool, which grows to hundreds) behind a short queue: past it a signup or signin is 429 with
//! `Retry-After`, and memory stays bounded whatever the concurrency (issue 12.2).

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use argon2::{Algorithm, Argon2, Params, PasswordHash, PasswordHasher, PasswordVerifier, Version};
use relay_wire::ErrorCode;

use crate::error::ApiError;

type Job = Box<dyn FnOnce() + Send>;

/// Jobs each worker may have waiting: a short queue, so a flood is refused rather than held.
const QUEUED_PER_WORKER: usize = 8;

/// Hashing threads: the cores, at most 4 (4 × 19 MiB is the memory hashing can hold).
fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4))
}

/// Hashes and verifies passwords; holds a decoy hash so an unknown email costs one verification too.
pub struct Passwords {
    params: Params,
    decoy: String,
    /// Dropping the sender ends the workers.
    jobs: SyncSender<Job>,
}

impl Passwords {
    /// `memory_kib` and `iterations` are the Argon2id costs (OWASP: 19 MiB, 2 passes, 1 lane).
    pub fn new(memory_kib: u32, iterations: u32) -> anyhow::Result<Self> {
        let params = Params::new(memory_kib, iterations, 1, None)
            .map_err(|e| anyhow::anyhow!("invalid Argon2 parameters: {e}"))?;
        let decoy_secret: [u8; 16] = rand::random();
        let decoy = hash_with(&params, &hex::encode(decoy_secret))?;
        let workers = workers();
        let (jobs, queue) = sync_channel::<Job>(workers * QUEUED_PER_WORKER);
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..workers {
            let queue = Arc::clone(&queue);
            std::thread::Builder::new()
                .name(format!("relay-argon2-{i}"))
                .spawn(move || work(&queue))
                .map_err(|e| anyhow::anyhow!("cannot start a password hashing thread: {e}"))?;
        }
        Ok(Self {
            params,
            decoy,
            jobs,
        })
    }

    pub async fn hash(&self, password: &str) -> Result<String, ApiError> {
        let params = self.params.clone();
        let password = password.to_owned();
        self.run(move || hash_with(&params, &password))
            .await?
            .map_err(ApiError::internal)
    }

    /// Verifies against `stored`, or against the decoy when there is no account, so both cost the same.
    pub async fn verify(&self, password: &str, stored: Option<&str>) -> Result<bool, ApiError> {
        let known = stored.is_some();
        let hash = stored.unwrap_or(&self.decoy).to_owned();
        let password = password.to_owned();
        let matched = self
            .run(move || {
                PasswordHash::new(&hash)
                    .map(|parsed| {
                        Argon2::default()
                            .verify_password(password.as_bytes(), &parsed)
                            .is_ok()
                    })
                    .unwrap_or(false)
            })
            .await?;
        Ok(known && matched)
    }

    /// Runs `f` on the pool, or refuses at once when the queue is full.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                return Err(ApiError::new(
                    ErrorCode::RateLimited,
                    "the server is busy checking passwords; retry after the time in Retry-After",
                )
                .with_retry_after(1));
            }
            Err(TrySendError::Disconnected(_)) => {
                return Err(ApiError::internal("the password hashing threads are gone"));
            }
        }
        rx.await
            .map_err(|_| ApiError::internal("a password hashing job was dropped"))
    }
}

fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held only while taking a job, never while hashing.
        let next = match queue.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match next {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

fn hash_with(params: &Params, password: &str) -> anyhow::Result<String> {
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    argon
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("cannot hash password: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_are_argon2id_salted_and_verify() {
        let p = Passwords::new(64, 1).unwrap();
        let a = p.hash("correct horse").await.unwrap();
        let b = p.hash("correct horse").await.unwrap();
        assert!(a.starts_with("$argon2id$"), "{a}");
        assert_ne!(a, b, "salts must differ");
        assert!(p.verify("correct horse", Some(&a)).await.unwrap());
        assert!(!p.verify("wrong horse", Some(&a)).await.unwrap());
        assert!(!p.verify("correct horse", None).await.unwrap());
    }
}
