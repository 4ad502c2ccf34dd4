//! Tavily: `POST {base}/search` `{query, max_results}` with a Bearer key → `{results: [{title, url, content}]}`.

use relay_wire::suggest::SearchResult;
use serde_json::json;

use super::backend::{SearchBackend, SearchError};
use super::client::{ContentResults, fetch};

pub const DEFAULT_BASE_URL: &str = "https://api.tavily.com";

pub struct Tavily {
    pub http: reqwest::Client,
    pub base_url: String,
    pub key: String,
}

#[async_trait::async_trait]
impl SearchBackend for Tavily {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchResult>, SearchError> {
        let url = format!("{}/search", self.base_url.trim_end_matches('/'));
        let request = self
            .http
            .post(url)
            .bearer_auth(&self.key)
            .json(&json!({"query": query, "max_results": limit, "search_depth": "basic"}));
        let body: ContentResults = fetch(request).await?;
        Ok(body.into_results())
    }
}
