//! Password hashing with Argon2id. Hashing runs on the blocking pool so it never stalls the runtime.

use argon2::{Algorithm, Argon2, Params, PasswordHash, PasswordHasher, PasswordVerifier, Version};

use crate::error::ApiError;

/// Hashes and verifies passwords; holds a decoy hash so an unknown email costs one verification too.
pub struct Passwords {
    params: Params,
    decoy: String,
}

impl Passwords {
    /// `memory_kib` and `iterations` are the Argon2id costs (OWASP: 19 MiB, 2 passes, 1 lane).
    pub fn new(memory_kib: u32, iterations: u32) -> anyhow::Result<Self> {
        let params = Params::new(memory_kib, iterations, 1, None)
            .map_err(|e| anyhow::anyhow!("invalid Argon2 parameters: {e}"))?;
        let decoy_secret: [u8; 16] = rand::random();
        let decoy = hash_with(&params, &hex::encode(decoy_secret))?;
        Ok(Self { params, decoy })
    }

    pub async fn hash(&self, password: &str) -> Result<String, ApiError> {
        let params = self.params.clone();
        let password = password.to_owned();
        tokio::task::spawn_blocking(move || hash_with(&params, &password))
            .await
            .map_err(ApiError::internal)?
            .map_err(ApiError::internal)
    }

    /// Verifies against `stored`, or against the decoy when there is no account, so both cost the same.
    pub async fn verify(&self, password: &str, stored: Option<&str>) -> Result<bool, ApiError> {
        let known = stored.is_some();
        let hash = stored.unwrap_or(&self.decoy).to_owned();
        let password = password.to_owned();
        let matched = tokio::task::spawn_blocking(move || {
            PasswordHash::new(&hash)
                .map(|parsed| {
                    Argon2::default()
                        .verify_password(password.as_bytes(), &parsed)
                        .is_ok()
                })
                .unwrap_or(false)
        })
        .await
        .map_err(ApiError::internal)?;
        Ok(known && matched)
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
