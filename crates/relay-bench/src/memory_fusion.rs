//! The memory stage's in-process rows with embeddings (issue 44): the same notes and questions
//! embedded by the stage's embeddings server, int8-quantised as Relay stores them, and ranked by
//! Relay's fused score (`LexIndex::fused`) at several lexical weights, to choose the weight on the
//! dev set.

use anyhow::{Context, Result};
use relay_server::store::Note;
use relay_server::store::vectors::{VectorSet, normalised, rows_of};
use serde_json::{Value, json};

use crate::memory::Embedder;

/// The (lexical share, neighbour share of the cosine) pairs tried; Relay's defaults are 0.4 and
/// 0.3.
pub const WEIGHTS: [(f64, f64); 7] = [
    (0.4, 0.0),
    (0.4, 0.15),
    (0.4, 0.3),
    (0.4, 0.5),
    (0.3, 0.3),
    (0.5, 0.3),
    (0.6, 0.3),
];

/// The vectors of `texts`, in order, from the embeddings server.
pub async fn embed(
    client: &reqwest::Client,
    embedder: &Embedder,
    texts: &[&str],
) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(256) {
        let body: Value = client
            .post(format!("{}/embeddings", embedder.base_url))
            .json(&json!({"model": embedder.model, "input": chunk}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let data = body["data"].as_array().context("no data")?;
        for item in data {
            let v: Vec<f32> = item["embedding"]
                .as_array()
                .context("no embedding")?
                .iter()
                .filter_map(Value::as_f64)
                .map(|x| x as f32)
                .collect();
            out.push(v);
        }
    }
    Ok(out)
}

/// The notes' vectors as a project's `VectorSet`, quantised as Relay stores them.
pub fn vector_set(model: &str, notes: &[Note], vectors: Vec<Vec<f32>>) -> VectorSet {
    let mut set = VectorSet::default();
    set.read_after(model, notes.len());
    set.add(rows_of(
        notes
            .iter()
            .zip(&vectors)
            .map(|(n, v)| (n.id.as_str().to_owned(), v.as_slice())),
    ));
    set
}

/// A question's vector as Relay ranks with it (normalised).
pub fn query(v: Vec<f32>) -> Vec<f32> {
    normalised(v).unwrap_or_default()
}
