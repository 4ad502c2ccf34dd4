//! Brave Search API: `GET {base}/res/v1/web/search?q=…&count=N` with `X-Subscription-Token` →
//! `{web: {results: [{title, url, description}]}}`.

use relay_wire::suggest::SearchResult;
use serde::Deserialize;

use super::backend::{SearchBackend, SearchError, query_string};
use super::client::fetch;

pub const DEFAULT_BASE_URL: &str = "https://api.search.brave.com";

pub struct Brave {
    pub http: reqwest::Client,
    pub base_url: String,
    pub key: String,
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    web: Option<Web>,
}

#[derive(Deserialize)]
struct Web {
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
    description: String,
}

#[async_trait::async_trait]
impl SearchBackend for Brave {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchResult>, SearchError> {
        let url = format!(
            "{}/res/v1/web/search?{}",
            self.base_url.trim_end_matches('/'),
            query_string(&[("q", query), ("count", &limit.to_string())])
        );
        let request = self
            .http
            .get(url)
            .header("X-Subscription-Token", &self.key)
            .header("Accept", "application/json");
        let body: Body = fetch(request).await?;
        Ok(body
            .web
            .map(|w| w.results)
            .unwrap_or_default()
            .into_iter()
            .map(|i| SearchResult {
                title: i.title,
                url: i.url,
                snippet: i.description,
            })
            .collect())
    }
}
