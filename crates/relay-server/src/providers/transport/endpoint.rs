//! What the three HTTP adapters share: where the provider is, its key (never shown in `Debug`
//! output), the HTTP clients, and sending one streaming request with the key in its header:
//! through reqwest's lanes to an `https://` provider, on Relay's own HTTP/1.1 connections
//! (`providers::transport::plain`) to a plain-`http://` one.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;

use super::lanes::Lanes;
use super::refusal;
use crate::providers::sse::{self, EventNormaliser};
use crate::providers::{EventStream, ProviderError};

/// The header a provider reads its key from.
#[derive(Debug, Clone, Copy)]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>` (OpenAI and compatible servers).
    Bearer,
    /// The key as the whole value of this header (`x-api-key`, `x-goog-api-key`).
    Named(&'static str),
}

/// A provider's address, key and clients.
#[derive(Clone)]
pub struct Endpoint {
    base_url: String,
    api_key: Option<String>,
    key_header: KeyHeader,
    lanes: Arc<Lanes>,
}

/// A provider's successful answer: its body, still streaming. On a lane, the leg keeps its
/// place there until the body is dropped.
pub struct Upstream {
    pub body: BoxStream<'static, Result<Bytes, ProviderError>>,
    /// The most one SSE line or event of `body` may hold (`[routing] max_event_bytes`).
    pub max_event_bytes: usize,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An empty `base_url` means `default`; a trailing slash is dropped; an empty key is none
    /// (a local server needs no key).
    pub fn new(
        base_url: String,
        default: &str,
        api_key: Option<String>,
        key_header: KeyHeader,
        lanes: Arc<Lanes>,
    ) -> Self {
        let base_url = if base_url.trim().is_empty() {
            default
        } else {
            base_url.as_str()
        };
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.filter(|k| !k.is_empty()),
            key_header,
            lanes,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// POSTs `body` (JSON, see `json`) to `url` asking for server-sent events, with the key and any `extra`
    /// headers, and waits for the response headers; a non-2xx answer becomes an error.
    pub async fn post_sse(
        &self,
        url: reqwest::Url,
        body: Vec<u8>,
        extra: &[(&'static str, &str)],
    ) -> Result<Upstream, ProviderError> {
        let headers = self.headers(extra)?;
        if url.scheme() == "http" {
            let answer = self.lanes.plain().post(&url, headers, body).await?;
            if !answer.status.is_success() {
                return Err(refusal::refusal(answer.status, &answer.headers, answer.body).await);
            }
            return Ok(Upstream {
                body: answer.body,
                max_event_bytes: self.lanes.max_event_bytes(),
            });
        }
        let (http, lease) = self
            .lanes
            .lease()
            .map_err(|_| ProviderError::Connect("the HTTP client could not be built".into()))?;
        let response = refusal::send(http.post(url).headers(headers).body(body)).await?;
        let body = response.bytes_stream().map(move |chunk| {
            let _ = &lease;
            chunk.map_err(|_| ProviderError::Connect(refusal::BROKE.into()))
        });
        Ok(Upstream {
            body: Box::pin(body),
            max_event_bytes: self.lanes.max_event_bytes(),
        })
    }

    /// The request's headers: JSON in, server-sent events out, the caller's `extra`, the trace
    /// context, and the key.
    fn headers(&self, extra: &[(&'static str, &str)]) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::with_capacity(6 + extra.len());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        for (name, value) in extra {
            // A client's header (`anthropic-beta`) that is no valid value is not sent.
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(header_name(name)?, value);
            }
        }
        // The provider sees this attempt as the parent of its own spans (W3C traceparent).
        for (name, value) in crate::telemetry::outgoing_headers() {
            headers.insert(name, value);
        }
        if let Some(key) = &self.api_key {
            let (name, value) = match self.key_header {
                KeyHeader::Bearer => (AUTHORIZATION, format!("Bearer {key}")),
                KeyHeader::Named(name) => (header_name(name)?, key.clone()),
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                ProviderError::Connect("the API key is not a valid header value".into())
            })?;
            // Sensitive headers stay out of debug output.
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(headers)
    }

    /// `base_url` followed by `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> Result<reqwest::Url, ProviderError> {
        reqwest::Url::parse(&format!("{}{path}", self.base_url))
            .map_err(|_| ProviderError::Connect("the provider's base URL is not usable".into()))
    }
}

/// A request body as JSON.
pub fn json(body: &impl Serialize) -> Result<Vec<u8>, ProviderError> {
    serde_json::to_vec(body).map_err(unsendable)
}

/// A body that could not be written as JSON (the error's text stays out of it: it may quote the
/// body).
pub fn unsendable(_: serde_json::Error) -> ProviderError {
    ProviderError::Connect("the request could not be sent".into())
}

/// One of the adapters' own header names (never a caller's).
fn header_name(name: &str) -> Result<HeaderName, ProviderError> {
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| ProviderError::Connect("the request could not be sent".into()))
}

/// Streams a successful answer's body through `normaliser`.
pub(crate) fn stream_response<N: EventNormaliser>(
    upstream: Upstream,
    normaliser: N,
) -> EventStream {
    sse::drive_capped(upstream.body, upstream.max_event_bytes, normaliser)
}

/// As `stream_response`, each event's own bytes first (`ProviderEvent::Raw`) when `raw`.
pub(crate) fn stream_response_raw<N: EventNormaliser>(
    upstream: Upstream,
    normaliser: N,
    raw: bool,
) -> EventStream {
    if raw {
        sse::drive_raw(upstream.body, upstream.max_event_bytes, normaliser)
    } else {
        stream_response(upstream, normaliser)
    }
}
