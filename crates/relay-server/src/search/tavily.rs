//! Tavily: `POST {base}/search` `{query, max_results}` with a Bearer key → `{results: [{title, url, content}]}`.

use relay_wire::suggest::SearchResult;
use serde::Deserialize;
use serde_json::json;

use super::{SearchBackend, SearchError, status_error, transport};

pub const DEFAULT_BASE_URL: &str = "https://api.tavily.com";

pub struct Tavily {
    pub http: reqwest::Client,
    pub base_url: String,
    pub key: String,
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    results: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    content: String,
}

#[async_trait::async_trait]
impl SearchBackend for Tavily {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchResult>, SearchError> {
        let url = format!("{}/search", self.base_url.trim_end_matches('/'));
        let r = self
            .http
            .post(url)
            .bearer_auth(&self.key)
            .json(&json!({"query": query, "max_results": limit, "search_depth": "basic"}))
            .send()
            .await
            .map_err(|e| transport(&e))?;
        if !r.status().is_success() {
            return Err(status_error(&r));
        }
        let body: Body = r.json().await.map_err(|e| transport(&e))?;
        Ok(body
            .results
            .into_iter()
            .map(|i| SearchResult {
                title: i.title,
                url: i.url,
                snippet: i.content,
            })
            .collect())
    }
}
