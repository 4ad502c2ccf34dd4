//! What the three HTTP adapters share: where the provider is, its key (never shown in `Debug`
//! output), the HTTP clients, and sending one streaming request with the key in its header.

use std::fmt;
use std::sync::Arc;

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use serde::Serialize;

use super::ProviderError;
use super::lanes::{Lanes, Lease};
use super::sse;

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

/// A provider's answer (headers in, body still streaming) and the leg's place on its lane,
/// which is given back when the body is dropped.
pub struct Upstream {
    pub response: reqwest::Response,
    pub lease: Lease,
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

    /// POSTs `body` as JSON to `url` asking for server-sent events, with the key and any `extra`
    /// headers, and waits for the response headers; a non-2xx answer becomes an error.
    pub async fn post_sse(
        &self,
        url: reqwest::Url,
        body: &impl Serialize,
        extra: &[(&'static str, &'static str)],
    ) -> Result<Upstream, ProviderError> {
        let (http, lease) = self
            .lanes
            .lease()
            .map_err(|_| ProviderError::Connect("the HTTP client could not be built".into()))?;
        let mut builder = http
            .post(url)
            .header(ACCEPT, "text/event-stream")
            .json(body);
        for (name, value) in extra {
            builder = builder.header(*name, *value);
        }
        // The provider sees this attempt as the parent of its own spans (W3C traceparent).
        for (name, value) in crate::telemetry::outgoing_headers() {
            builder = builder.header(name, value);
        }
        if let Some(key) = &self.api_key {
            let (name, value) = match self.key_header {
                KeyHeader::Bearer => (AUTHORIZATION.as_str(), format!("Bearer {key}")),
                KeyHeader::Named(name) => (name, key.clone()),
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                ProviderError::Connect("the API key is not a valid header value".into())
            })?;
            // Sensitive headers stay out of reqwest's and hyper's debug output.
            value.set_sensitive(true);
            builder = builder.header(name, value);
        }
        let response = sse::send(builder).await?;
        Ok(Upstream { response, lease })
    }

    /// `base_url` followed by `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> Result<reqwest::Url, ProviderError> {
        reqwest::Url::parse(&format!("{}{path}", self.base_url))
            .map_err(|_| ProviderError::Connect("the provider's base URL is not usable".into()))
    }
}
