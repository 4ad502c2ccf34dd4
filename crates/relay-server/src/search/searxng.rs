//! SearXNG's JSON API: `GET {base}/search?q=…&format=json` → `{results: [{title, url, content}]}`.

use relay_wire::suggest::SearchResult;
use serde::Deserialize;

use super::{SearchBackend, SearchError, status_error, transport};

pub struct Searxng {
    pub http: reqwest::Client,
    pub base_url: String,
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
impl SearchBackend for Searxng {
    async fn search(&self, query: &str, _limit: usize) -> Result<Vec<SearchResult>, SearchError> {
        let url = format!(
            "{}/search?{}",
            self.base_url.trim_end_matches('/'),
            super::query_string(&[("q", query), ("format", "json")])
        );
        let r = self.http.get(url).send().await.map_err(|e| transport(&e))?;
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
