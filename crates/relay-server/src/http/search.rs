//! `POST /v1/search`: results from the configured backend normalised to `{title, url, snippet}`,
//! upstream failures mapped to the contract's codes.

use axum::extract::State;
use relay_wire::suggest::{SearchRequest, SearchResponse, SearchResult};
use relay_wire::{ErrorBody, ErrorCode};

use crate::accounts::Caller;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::Json;
use crate::http::state::AppState;
use crate::search::SearchError;

/// Results per search when the request names no limit, and the most it may ask for.
const DEFAULT_LIMIT: i64 = 5;
const MAX_LIMIT: i64 = 10;
/// Snippets are cut to this many characters.
const MAX_SNIPPET: usize = 500;
const MAX_QUERY: usize = 1_000;

/// Plain text from a snippet that may carry HTML markup or entities, cut to the snippet bound.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&nbsp;", " ");
    let folded = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() <= MAX_SNIPPET {
        folded
    } else {
        let mut cut: String = folded.chars().take(MAX_SNIPPET - 1).collect();
        cut.push('…');
        cut
    }
}

/// Search the web through the configured backend.
#[utoipa::path(post, path = "/v1/search", tag = "suggest",
    security(("bearer" = [])),
    request_body = SearchRequest,
    responses(
        (status = 200, description = "At most `limit` results (default 5, max 10)", body = SearchResponse),
        (status = 400, description = "Empty query or a limit below 1", body = ErrorBody),
        (status = 429, description = "`rate_limited` by the search backend", body = ErrorBody),
        (status = 502, description = "`upstream_error`: the backend answered with an error or a malformed body", body = ErrorBody),
        (status = 503, description = "`search_unavailable`: no backend configured, or it cannot be reached", body = ErrorBody),
    ))]
pub async fn search(
    State(state): State<AppState>,
    _caller: Caller,
    Json(body): Json<SearchRequest>,
) -> ApiResult<axum::Json<SearchResponse>> {
    let query = body.query.trim();
    if query.is_empty() {
        return Err(ApiError::invalid("query is empty"));
    }
    if query.len() > MAX_QUERY {
        return Err(ApiError::invalid("query is longer than 1000 bytes"));
    }
    let limit = body.limit.unwrap_or(DEFAULT_LIMIT);
    if limit < 1 {
        return Err(ApiError::invalid("limit must be at least 1"));
    }
    let limit = usize::try_from(limit.min(MAX_LIMIT)).unwrap_or(5);
    let Some(backend) = state.search() else {
        return Err(ApiError::new(
            ErrorCode::SearchUnavailable,
            "no search backend is configured on this server",
        ));
    };
    let results = backend.search(query, limit).await.map_err(|e| match e {
        SearchError::Unavailable => ApiError::new(
            ErrorCode::SearchUnavailable,
            "the search backend cannot be reached; retry shortly",
        ),
        SearchError::RateLimited(wait) => ApiError::rate_limited(wait.unwrap_or(1)),
        SearchError::Upstream(what) => {
            tracing::warn!(error = %what, "search backend failed");
            ApiError::new(ErrorCode::UpstreamError, "the search backend failed")
        }
    })?;
    let results = results
        .into_iter()
        .filter(|r| r.url.starts_with("http://") || r.url.starts_with("https://"))
        .take(limit)
        .map(|r| SearchResult {
            title: clean(&r.title),
            url: r.url,
            snippet: clean(&r.snippet),
        })
        .collect();
    Ok(axum::Json(SearchResponse { results }))
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn snippets_lose_markup_and_are_bounded() {
        assert_eq!(
            clean("The <strong>Rust</strong> &amp; <em>Cargo</em>\n book"),
            "The Rust & Cargo book"
        );
        let long = "word ".repeat(300);
        let c = clean(&long);
        assert_eq!(c.chars().count(), 500);
        assert!(c.ends_with('…'));
    }
}
