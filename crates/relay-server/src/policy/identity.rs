//! The identifier providers see for an account: a keyed hash of the account id, so a provider's
//! abuse enforcement tells accounts apart without learning who they are, and no client can name
//! another account (or get the operator's whole key flagged under a name of its choosing).

use sha2::{Digest, Sha256};

/// One account's identifier as providers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    id: String,
}

impl Identity {
    /// `relay-` and 32 hex digits of SHA-256 over the secret and the account id (a keyed hash:
    /// without the secret the id cannot be linked to the account).
    pub fn of(secret: &str, user_id: &str) -> Self {
        let mut h = Sha256::new();
        h.update(secret.as_bytes());
        h.update([0u8]);
        h.update(user_id.as_bytes());
        let digest = h.finalize();
        Self {
            id: format!("relay-{}", hex::encode(&digest[..16])),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// A client's prompt cache key within the account's own namespace.
    pub fn namespaced(&self, key: &str) -> String {
        if key.starts_with(&self.id) {
            key.to_owned()
        } else {
            format!("{}:{key}", self.id)
        }
    }
}
