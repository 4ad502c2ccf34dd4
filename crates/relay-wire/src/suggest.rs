//! `POST /v1/suggest` (spec §4.1, Suggest rules 1-3) and `POST /v1/search` (CONTRACT.md).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A terminal asks for a completion of what the user is typing.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SuggestRequest {
    /// What the user typed so far.
    pub partial: String,
    /// The terminal's working directory.
    #[serde(default)]
    pub cwd: String,
    /// Recent command lines, oldest first.
    #[serde(default)]
    pub recent: Vec<String>,
}

/// One completed command line that strictly extends `partial`, or null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SuggestResponse {
    pub suggestion: Option<String>,
}

/// `POST /v1/search`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SearchRequest {
    pub query: String,
    /// Default 5; at most 10.
    #[serde(default)]
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    /// Plain text, at most 500 characters.
    pub snippet: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
}
