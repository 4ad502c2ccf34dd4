//! The client's view of `GET /v1/models` and `GET /v1/usage/legs`: only the fields a client
//! shows (the relay sends more; unknown fields are ignored).

use serde::Deserialize;

/// `GET /v1/models` in its OpenAI form.
#[derive(Debug, Clone, Deserialize)]
pub struct ModelList {
    pub data: Vec<ModelEntry>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ModelEntry {
    pub id: String,
}

/// One page of `GET /v1/usage/legs`, newest first.
#[derive(Debug, Clone, Deserialize)]
pub struct LegPage {
    pub items: Vec<LegRecord>,
    pub next: Option<String>,
}

/// One leg as the relay's ledger recorded it.
#[derive(Debug, Clone, Deserialize)]
pub struct LegRecord {
    pub request_id: String,
    pub model: String,
    pub status: String,
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub output_tokens: i64,
    /// USD; absent when the model has no price configured.
    pub cost_usd: Option<f64>,
}
