//! The search backends' common face: the trait each backend implements, its errors, and building
//! the configured one. Free of the HTTP handler, so the state can hold a backend without
//! depending on the handler that uses it.

use std::sync::Arc;
use std::time::Duration;

use relay_wire::suggest::SearchResult;

use super::{brave, searxng, tavily};
use crate::config::{Env, SearchConfig, SearchKind};

/// Why a backend failed, in the terms the API answers with.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("search backend unreachable or too slow")]
    Unavailable,
    #[error("search backend is rate limiting")]
    RateLimited(Option<u64>),
    #[error("search backend answered {0}")]
    Upstream(String),
}

#[async_trait::async_trait]
pub trait SearchBackend: Send + Sync {
    /// Raw results; normalisation (limits, snippet cleaning) happens in one place, here.
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchResult>, SearchError>;
}

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

/// `k=v&…`, each part percent-encoded.
pub(super) fn query_string(pairs: &[(&str, &str)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}
