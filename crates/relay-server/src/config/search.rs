//! `[search]`: the web search backend behind `/v1/search`.

use serde::Deserialize;

/// `[search]`. Its `kind` has no default, so the table has no `Default` either.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    pub kind: SearchKind,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default = "SearchConfig::default_timeout_ms")]
    pub timeout_ms: u64,
}

impl SearchConfig {
    /// `timeout_ms` when the table names none.
    const fn default_timeout_ms() -> u64 {
        5_000
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchKind {
    Searxng,
    Brave,
    Tavily,
}
