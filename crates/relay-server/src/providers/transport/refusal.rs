//! Sending a request and reading a refusal: a non-2xx answer becomes a `ProviderError` that
//! carries no URL or header and of the body only its type/code and sanitised message (429 with
//! its `Retry-After` too), and a transport error is described by kind only.

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

/// How long a refusal's body is waited for: it only says why, and the next model waits on it.
const BODY_WAIT: Duration = Duration::from_secs(5);

/// The most bytes of a refusal's body read: providers' error bodies are well under 4 KiB.
const BODY_CAP: usize = 64 * 1024;

/// The error a non-2xx answer stands for, refined by the error body's type or code and its
/// message where it has them; 429 is a rate limit with its `Retry-After`, and its body is read
/// too (issue 42: OpenAI's `insufficient_quota` comes as a 429 and only its body says so).
pub(crate) async fn refusal<S, E>(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: S,
) -> ProviderError
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    refusal_within(status, headers, body, BODY_WAIT).await
}

/// `refusal`, waiting at most `wait` for the body.
async fn refusal_within<S, E>(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: S,
    wait: Duration,
) -> ProviderError
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    // A slow or endless body is not waited for: what arrived by then is used.
    let mut read = Vec::new();
    let _ = tokio::time::timeout(wait, read_capped(body, BODY_CAP, &mut read)).await;
    let mut error = error_from_body(status.as_u16(), &read);
    if let ProviderError::RateLimited { retry_after: r, .. } = &mut error {
        *r = retry_after(headers);
    }
    error
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

/// Reads at most `cap` bytes of an error body into `out`: enough for the error's type and
/// message, bounded so a misbehaving upstream cannot make us buffer without limit. Into a
/// buffer the caller keeps, so that a read cut by its timeout still leaves what came.
async fn read_capped<S, E>(mut body: S, cap: usize, out: &mut Vec<u8>)
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    while out.len() < cap {
        match body.next().await {
            Some(Ok(chunk)) => {
                let room = cap - out.len();
                out.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Some(Err(_)) | None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::StatusCode;
    use reqwest::header::{HeaderMap, HeaderValue};

    fn chunks(parts: Vec<&'static str>) -> impl Stream<Item = Result<Bytes, ()>> + Unpin {
        futures::stream::iter(
            parts
                .into_iter()
                .map(|p| Ok(Bytes::from_static(p.as_bytes()))),
        )
    }

    #[tokio::test]
    async fn a_429_keeps_its_retry_after_and_gains_the_bodys_words() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("7"));
        let body = chunks(vec![
            r#"{"error": {"message": "You exceeded your current quota","#,
            r#" "type": "insufficient_quota", "code": "insufficient_quota"}}"#,
        ]);
        let e = refusal(StatusCode::TOO_MANY_REQUESTS, &headers, body).await;
        assert_eq!(
            e,
            ProviderError::RateLimited {
                retry_after: Some(Duration::from_secs(7)),
                code: Some("insufficient_quota".into()),
                detail: Some("You exceeded your current quota".into()),
            }
        );
    }

    #[tokio::test]
    async fn a_body_that_never_ends_is_not_waited_for_past_its_bound() {
        // The head arrives, then nothing: the refusal is made from what came once the wait is up.
        let body = chunks(vec!["slow down"]).chain(futures::stream::pending());
        let wait = Duration::from_millis(200);
        let started = std::time::Instant::now();
        let e = refusal_within(
            StatusCode::TOO_MANY_REQUESTS,
            &HeaderMap::new(),
            Box::pin(body),
            wait,
        )
        .await;
        let took = started.elapsed();
        assert!(took >= wait && took < wait * 10, "{took:?}");
        assert_eq!(
            e,
            ProviderError::RateLimited {
                retry_after: None,
                code: None,
                detail: Some("slow down".into()),
            }
        );
    }

    #[tokio::test]
    async fn no_more_than_the_cap_is_kept() {
        let big = futures::stream::repeat_with(|| Ok::<_, ()>(Bytes::from(vec![b'a'; 10_000])));
        let mut out = Vec::new();
        read_capped(Box::pin(big), BODY_CAP, &mut out).await;
        assert_eq!(out.len(), BODY_CAP);
    }
}
