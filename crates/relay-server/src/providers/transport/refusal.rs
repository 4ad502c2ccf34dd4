//! Sending a request and reading a refusal: a non-2xx answer becomes a `ProviderError` that
//! carries no URL or header and of the body only its sanitised message (429 with its
//! `Retry-After`), and a transport error is described by kind only.

use std::time::Duration;

use crate::providers::{ProviderError, error_from_body};
use bytes::Bytes;
use futures::{Stream, StreamExt};

/// What a transport error while streaming is reported as (its own message may name the URL).
pub(crate) const BROKE: &str = "the connection broke while streaming";

/// Sends a request and waits for the response headers; a non-2xx answer becomes an error.
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, ProviderError> {
    let response = request.send().await.map_err(|e| connect_error(&e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let headers = response.headers().clone();
    Err(refusal(status, &headers, response.bytes_stream()).await)
}

/// The error a non-2xx answer stands for: 429 is a rate limit (with its `Retry-After`), any
/// other status is refined by the error body's type or code where it has one.
pub(crate) async fn refusal<S, E>(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: S,
) -> ProviderError
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        return ProviderError::RateLimited {
            retry_after: retry_after(headers),
        };
    }
    // The error body only refines the message: a slow one is not waited for long.
    let body = tokio::time::timeout(Duration::from_secs(5), read_capped(body, 64 * 1024))
        .await
        .unwrap_or_default();
    error_from_body(status.as_u16(), &body)
}

/// A reqwest error described by kind only: its `Display` names the URL, and a Gemini URL
/// could carry a key in its query.
fn connect_error(err: &reqwest::Error) -> ProviderError {
    let what = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "connection failed"
    } else if err.is_builder() || err.is_request() {
        "the request could not be sent"
    } else {
        "transport error"
    };
    ProviderError::Connect(what.to_owned())
}

/// `Retry-After` in seconds (OpenAI also sends `retry-after-ms`, more precise).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    header("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
        .map(Duration::from_secs_f64)
}

/// Reads at most `cap` bytes of an error body: enough for the error's type, bounded so a
/// misbehaving upstream cannot make us buffer without limit.
async fn read_capped<S, E>(mut body: S, cap: usize) -> Vec<u8>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let mut out = Vec::new();
    while out.len() < cap {
        match body.next().await {
            Some(Ok(chunk)) => out.extend_from_slice(&chunk),
            Some(Err(_)) | None => break,
        }
    }
    out
}
