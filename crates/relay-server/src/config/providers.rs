//! `[[providers]]`, `[[models]]` and `[routing]`: where legs and suggestions go, and how a leg
//! moves from one model to the next.

use std::path::PathBuf;

use serde::Deserialize;

/// `[[providers]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub name: String,
    pub kind: ProviderKind,
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the key; the key itself never appears in configuration.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// A PEM file of the certificates that sign the provider's server (a private CA), trusted for
    /// this provider in place of the system's roots, as `curl --cacert` does.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// How many legs share one HTTP/2 connection to this provider before another is opened
    /// (HTTPS providers that offer HTTP/2; plain `http://` ones use one connection per leg).
    #[serde(default = "default_streams_per_connection")]
    pub streams_per_connection: usize,
}

impl ProviderConfig {
    /// A provider with no `ca_file` and the default streams per connection.
    pub fn new(name: impl Into<String>, kind: ProviderKind) -> Self {
        Self {
            name: name.into(),
            kind,
            base_url: None,
            api_key_env: None,
            ca_file: None,
            streams_per_connection: default_streams_per_connection(),
        }
    }
}

/// Legs on one connection by default: the least a server should allow (RFC 9113 §6.5.2).
pub const DEFAULT_STREAMS_PER_CONNECTION: usize = 100;

fn default_streams_per_connection() -> usize {
    DEFAULT_STREAMS_PER_CONNECTION
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Openai,
    /// OpenAI's Responses API (`/responses`), as OpenAI, llama.cpp and LM Studio serve it.
    #[serde(rename = "openai_responses")]
    OpenaiResponses,
    Anthropic,
    Gemini,
    Demo,
}

impl ProviderKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::OpenaiResponses => "openai_responses",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Demo => "demo",
        }
    }
}

/// `[[models]]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub name: String,
    pub provider: String,
    pub upstream: String,
    /// Prices in USD per million tokens, for the usage ledger's cost; absent: no cost is shown.
    /// Uncached input tokens (input less cached and cache writes).
    #[serde(default)]
    pub input_price: Option<f64>,
    /// Input tokens read from the provider's cache.
    #[serde(default)]
    pub cached_input_price: Option<f64>,
    /// Input tokens written to the provider's cache.
    #[serde(default)]
    pub cache_write_price: Option<f64>,
    #[serde(default)]
    pub output_price: Option<f64>,
}

impl ModelConfig {
    /// The price keys and their values, for validation.
    pub fn prices(&self) -> [(&'static str, Option<f64>); 4] {
        [
            ("input_price", self.input_price),
            ("cached_input_price", self.cached_input_price),
            ("cache_write_price", self.cache_write_price),
            ("output_price", self.output_price),
        ]
    }
}

/// `[routing]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// Models tried in order for `model: "auto"`.
    pub auto: Vec<String>,
    /// The model behind `/v1/suggest`; absent means history only.
    pub suggest: Option<String>,
    /// Deadline for a model suggestion.
    pub suggest_deadline_ms: u64,
    /// An upstream silent this long (before or during a leg) ends it: before output the next model
    /// is tried, after the headers an `error` line ends the leg.
    pub idle_timeout_ms: u64,
    /// A `ping` line is sent after this long without another line.
    pub ping_interval_ms: u64,
    /// Tries per model before the leg moves to the next one.
    pub retries: u32,
    /// The most one line, or one event, of a provider's event stream may hold (bytes); past it
    /// the leg ends with an `upstream_event_too_large` error and the buffer is freed.
    pub max_event_bytes: u64,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            auto: Vec::new(),
            suggest: None,
            suggest_deadline_ms: 400,
            idle_timeout_ms: 120_000,
            ping_interval_ms: 15_000,
            retries: 1,
            max_event_bytes: 4 * 1024 * 1024,
        }
    }
}
