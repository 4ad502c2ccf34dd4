//! Server-side web search: one backend chosen by `[search]` (SearXNG, Brave or Tavily), built here;
//! the `POST /v1/search` handler is `http/search.rs`.

pub mod backend;
mod brave;
mod client;
mod searxng;
mod tavily;

use std::sync::Arc;
use std::time::Duration;

pub use backend::{SearchBackend, SearchError};

use crate::config::{Env, SearchConfig, SearchKind};

/// Builds the configured backend; `None` without `[search]`.
pub fn from_config(
    config: Option<&SearchConfig>,
    env: &dyn Env,
) -> anyhow::Result<Option<Arc<dyn SearchBackend>>> {
    let Some(c) = config else { return Ok(None) };
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(c.timeout_ms))
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the search HTTP client: {e}"))?;
    let key = match &c.api_key_env {
        Some(var) => Some(env.var(var).ok_or_else(|| {
            anyhow::anyhow!("search: the environment variable {var} (api_key_env) is not set")
        })?),
        None => None,
    };
    let need_key = |kind: &str| {
        key.clone()
            .ok_or_else(|| anyhow::anyhow!("search: kind `{kind}` needs api_key_env"))
    };
    Ok(Some(match c.kind {
        SearchKind::Searxng => Arc::new(searxng::Searxng {
            http,
            base_url: c.base_url.clone().unwrap_or_default(),
        }),
        SearchKind::Brave => Arc::new(brave::Brave {
            http,
            base_url: c
                .base_url
                .clone()
                .unwrap_or_else(|| brave::DEFAULT_BASE_URL.to_owned()),
            key: need_key("brave")?,
        }),
        SearchKind::Tavily => Arc::new(tavily::Tavily {
            http,
            base_url: c
                .base_url
                .clone()
                .unwrap_or_else(|| tavily::DEFAULT_BASE_URL.to_owned()),
            key: need_key("tavily")?,
        }),
    }))
}
