//! An OpenAI-compatible `POST {base_url}/embeddings` (OpenAI, Ollama, llama.cpp `--embedding`,
//! vLLM): texts in, one vector per text out, in the order given.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

/// The longest a background batch may take before it counts as failed (and is tried again later).
const BATCH_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Client {
    http: reqwest::Client,
    url: String,
    key: Option<String>,
    pub model: String,
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl Client {
    pub fn new(base_url: &str, key: Option<String>, model: String) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(BATCH_TIMEOUT)
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the embeddings HTTP client: {e}"))?;
        Ok(Self {
            http,
            url: format!("{}/embeddings", base_url.trim_end_matches('/')),
            key,
            model,
        })
    }

    /// One vector per text, in order. The error says what went wrong without the provider's body
    /// (which may echo the texts).
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let mut request = self
            .http
            .post(&self.url)
            .json(&json!({"model": self.model, "input": texts}));
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("embeddings request failed: {}", e.without_url()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("embeddings endpoint answered {status}"));
        }
        let answer: Answer = response
            .json()
            .await
            .map_err(|e| format!("embeddings answer unreadable: {}", e.without_url()))?;
        if answer.data.len() != texts.len() {
            return Err(format!(
                "embeddings endpoint gave {} vectors for {} texts",
                answer.data.len(),
                texts.len()
            ));
        }
        let mut items = answer.data;
        items.sort_by_key(|i| i.index.unwrap_or(usize::MAX));
        Ok(items.into_iter().map(|i| i.embedding).collect())
    }
}
