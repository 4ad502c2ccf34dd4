//! The search backends' common face: the trait each backend implements and its errors. Building
//! the configured one is `search::from_config`'s, so no backend imports the module that builds it.

use relay_wire::suggest::SearchResult;

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

/// `k=v&…`, each part percent-encoded.
pub(super) fn query_string(pairs: &[(&str, &str)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}
