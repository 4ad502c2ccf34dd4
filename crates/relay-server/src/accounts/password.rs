//! Password hashing with Argon2id on a small pool of its own threads.
//!
//! Each hash needs `argon2_memory_kib` (19 MiB by default) of working memory. Allocated per call
//! (64-byte aligned), glibc fragments it and keeps it: 20 signups held 360 MB. So hashing runs on
//! at most `workers()` dedicated threads (not the blocking pool, which grows to hundreds), each
//! reusing one buffer for every hash, behind a short queue: past it a signup or signin is 429 with
//! `Retry-After`, and memory stays bounded whatever the concurrency (issue 12.2).

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use argon2::password_hash::phc::{Output, ParamsString, Salt};
use argon2::{Algorithm, Argon2, Block, Params, PasswordHash, Version};
use relay_wire::ErrorCode;

use crate::error::ApiError;

/// A job gets its worker's Argon2 working memory.
type Job = Box<dyn FnOnce(&mut Vec<Block>) + Send>;

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
        let decoy = hash_with(&mut Vec::new(), &params, &hex::encode(decoy_secret))?;
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
        self.run(move |memory| hash_with(memory, &params, &password))
            .await?
            .map_err(ApiError::internal)
    }

    /// Verifies against `stored`, or against the decoy when there is no account, so both cost the same.
    pub async fn verify(&self, password: &str, stored: Option<&str>) -> Result<bool, ApiError> {
        let known = stored.is_some();
        let hash = stored.unwrap_or(&self.decoy).to_owned();
        let password = password.to_owned();
        let matched = self
            .run(move |memory| verify_with(memory, &hash, &password))
            .await?;
        Ok(known && matched)
    }

    /// Runs `f` on the pool, or refuses at once when the queue is full.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Vec<Block>) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |memory| {
            let _ = tx.send(f(memory));
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
    let mut memory = Vec::new();
    loop {
        // The lock is held only while taking a job, never while hashing.
        let next = match queue.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match next {
            Ok(job) => job(&mut memory),
            Err(_) => return,
        }
    }
}

fn hash_with(memory: &mut Vec<Block>, params: &Params, password: &str) -> anyhow::Result<String> {
    let salt: [u8; 16] = rand::random();
    let out = raw_hash(
        memory,
        Algorithm::Argon2id,
        Version::V0x13,
        params.clone(),
        password,
        &salt,
    )?;
    let phc = PasswordHash {
        algorithm: argon2::ARGON2ID_IDENT,
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(params)
            .map_err(|e| anyhow::anyhow!("argon2 parameters: {e}"))?,
        salt: Some(Salt::new(&salt).map_err(|e| anyhow::anyhow!("argon2 salt: {e}"))?),
        hash: Some(Output::new(&out).map_err(|e| anyhow::anyhow!("argon2 output: {e}"))?),
    };
    Ok(phc.to_string())
}

/// Whether `password` matches the PHC string `stored`, whatever parameters it was made with.
fn verify_with(memory: &mut Vec<Block>, stored: &str, password: &str) -> bool {
    let Ok(hash) = PasswordHash::new(stored) else {
        return false;
    };
    let (Ok(algorithm), Ok(params), Some(salt), Some(expected)) = (
        Algorithm::try_from(hash.algorithm.as_str()),
        Params::try_from(&hash),
        hash.salt.as_ref(),
        hash.hash.as_ref(),
    ) else {
        return false;
    };
    let version = hash.version.map_or(Ok(Version::V0x13), Version::try_from);
    let Ok(version) = version else {
        return false;
    };
    raw_hash(memory, algorithm, version, params, password, salt.as_ref())
        .ok()
        .and_then(|out| Output::new(&out).ok())
        // `Output`'s equality is constant-time.
        .is_some_and(|out| out == *expected)
}

/// The raw Argon2 output, computed in `memory` (grown once to the largest cost seen, then reused).
fn raw_hash(
    memory: &mut Vec<Block>,
    algorithm: Algorithm,
    version: Version,
    params: Params,
    password: &str,
    salt: &[u8],
) -> anyhow::Result<Vec<u8>> {
    let blocks = params.block_count();
    if memory.len() < blocks {
        memory.resize(blocks, Block::default());
    }
    let mut out = vec![0u8; params.output_len().unwrap_or(Params::DEFAULT_OUTPUT_LEN)];
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(password.as_bytes(), salt, &mut out, &mut memory[..blocks])
        .map_err(|e| anyhow::anyhow!("cannot hash password: {e}"))?;
    Ok(out)
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

    #[tokio::test]
    async fn hashes_made_by_the_argon2_crate_itself_still_verify() {
        use argon2::PasswordHasher;
        let params = Params::new(64, 1, 1, None).unwrap();
        let stored = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password(b"correct horse")
            .unwrap()
            .to_string();
        let p = Passwords::new(64, 1).unwrap();
        assert!(p.verify("correct horse", Some(&stored)).await.unwrap());
        assert!(!p.verify("wrong horse", Some(&stored)).await.unwrap());
        let ours = p.hash("correct horse").await.unwrap();
        assert!(PasswordHash::new(&ours).is_ok(), "{ours}");
    }
}
