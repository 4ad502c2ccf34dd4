//! Opening the stores a configuration names: each URL's scheme picks the backend, which builds its
//! pool and runs its migrations; a URL named twice (memory and auth on one database) opens once.

use std::sync::Arc;
use std::time::Duration;

use super::signin::SignInStore;
use super::{AuthStore, Backend, Opener, StoreOptions};
use crate::config::Config;

/// The stores a configuration names, opened (and migrated) once each.
pub struct Stores {
    pub memory: Backend,
    pub auth: Option<Arc<dyn AuthStore>>,
    /// Agents' sign-in, in the auth store's database; with `[auth]` only.
    pub signin: Option<Arc<dyn SignInStore>>,
}

impl Stores {
    /// Opens (and migrates) the memory store and, with `[auth]`, the auth store.
    pub async fn open(config: &Config) -> anyhow::Result<Self> {
        let mut opener = Opener::default();
        let memory = opener
            .open(
                &config.memory.url,
                "memory.url",
                &StoreOptions {
                    max_connections: config.memory.max_connections,
                    busy_timeout: Duration::from_millis(config.memory.busy_timeout_ms),
                },
            )
            .await?;
        let auth_backend = match &config.auth {
            Some(a) => Some(
                opener
                    .open(
                        &a.url,
                        "auth.url",
                        &StoreOptions {
                            max_connections: a.max_connections,
                            busy_timeout: Duration::from_millis(a.busy_timeout_ms),
                        },
                    )
                    .await?,
            ),
            None => None,
        };
        Ok(Self {
            memory,
            auth: auth_backend.as_ref().map(|b| b.auth.clone()),
            signin: auth_backend.map(|b| b.signin),
        })
    }
}
