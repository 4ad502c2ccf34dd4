//! The one client path every search backend takes: send the request, map a failed status, decode
//! the JSON body; so the three backends differ only in how they build the request and read results.

use relay_wire::suggest::SearchResult;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::backend::SearchError;

/// Sends `request` and decodes a 2xx body as `T`; transport, status and decode failures become
/// the [`SearchError`] the API answers with.
pub(super) async fn fetch<T: DeserializeOwned>(
    request: reqwest::RequestBuilder,
) -> Result<T, SearchError> {
    let r = request.send().await.map_err(|e| transport(&e))?;
    if !r.status().is_success() {
        return Err(status_error(&r));
    }
    r.json().await.map_err(|e| transport(&e))
}

/// A `{title, url, content}` result, the shape SearXNG and Tavily both answer with.
#[derive(Deserialize)]
pub(super) struct ContentItem {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    content: String,
}

impl From<ContentItem> for SearchResult {
    fn from(i: ContentItem) -> Self {
        SearchResult {
            title: i.title,
            url: i.url,
            snippet: i.content,
        }
    }
}

/// `{results: [{title, url, content}]}`.
#[derive(Deserialize)]
pub(super) struct ContentResults {
    #[serde(default)]
    results: Vec<ContentItem>,
}

impl ContentResults {
    pub(super) fn into_results(self) -> Vec<SearchResult> {
        self.results.into_iter().map(SearchResult::from).collect()
    }
}

/// Maps a transport failure.
fn transport(e: &reqwest::Error) -> SearchError {
    if e.is_decode() {
        SearchError::Upstream("a malformed body".into())
    } else {
        SearchError::Unavailable
    }
}

/// Maps a non-2xx status.
fn status_error(r: &reqwest::Response) -> SearchError {
    let status = r.status();
    if status.as_u16() == 429 {
        let wait = r
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        SearchError::RateLimited(wait)
    } else {
        SearchError::Upstream(format!("status {}", status.as_u16()))
    }
}
