//! SearXNG's JSON API: `GET {base}/search?q=…&format=json` → `{results: [{title, url, content}]}`.

use relay_wire::suggest::SearchResult;

use super::backend::{SearchBackend, SearchError, query_string};
use super::client::{ContentResults, fetch};

pub struct Searxng {
    pub http: reqwest::Client,
    pub base_url: String,
}

#[async_trait::async_trait]
impl SearchBackend for Searxng {
    async fn search(&self, query: &str, _limit: usize) -> Result<Vec<SearchResult>, SearchError> {
        let url = format!(
            "{}/search?{}",
            self.base_url.trim_end_matches('/'),
            query_string(&[("q", query), ("format", "json")])
        );
        let body: ContentResults = fetch(self.http.get(url)).await?;
        Ok(body.into_results())
    }
}
