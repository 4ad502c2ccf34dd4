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
    /// The pass-through policy (issue 38): what a client may ask of this model beyond a plain
    /// call. The most output tokens one call may ask for; a larger request is clamped to it.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// Service tiers billed above the default that clients may pick (`"priority"`); `auto`,
    /// `default` and `flex` always pass.
    #[serde(default)]
    pub service_tiers: Vec<String>,
    /// Cost multipliers per service tier (`{ priority = 2.0, flex = 0.5 }`), applied to the
    /// prices above for a call that names the tier.
    #[serde(default)]
    pub tier_price_multipliers: std::collections::BTreeMap<String, f64>,
    /// Provider-side tools the provider may run for a call on the operator's key
    /// (`"web_search"`, `"web_fetch"`, `"code_execution"`, ...); every other one is refused.
    #[serde(default)]
    pub hosted_tools: Vec<String>,
    /// Billed extras a call may ask for: `"logprobs"`, `"audio"`.
    #[serde(default)]
    pub features: Vec<String>,
    /// Priced `anthropic-beta` values this model may be sent (e.g. a long-context beta), beside
    /// the list every model gets (`[routing] anthropic_betas` and the built-in defaults).
    #[serde(default)]
    pub anthropic_betas: Vec<String>,
}

/// The tiers a call may name without the model's say: `priority` is billed higher and must be allowed.
pub const FREE_TIERS: [&str; 3] = ["auto", "default", "flex"];
/// The billed extras `features` may name.
pub const FEATURES: [&str; 2] = ["logprobs", "audio"];

impl ModelConfig {
    /// What is wrong with the model's pass-through policy keys, if anything.
    pub fn policy_problem(&self) -> Option<String> {
        if self.max_output_tokens == Some(0) {
            return Some("max_output_tokens must be at least 1".into());
        }
        if let Some(f) = self
            .features
            .iter()
            .find(|f| !FEATURES.contains(&f.as_str()))
        {
            return Some(format!(
                "features: `{f}` is not one of {}",
                FEATURES.join(", ")
            ));
        }
        if let Some(t) = self.hosted_tools.iter().find(|t| t.trim().is_empty()) {
            return Some(format!("hosted_tools: `{t}` is not a tool name"));
        }
        if let Some((tier, m)) = self
            .tier_price_multipliers
            .iter()
            .find(|(_, m)| !(m.is_finite() && **m >= 0.0))
        {
            return Some(format!(
                "tier_price_multipliers.{tier}: {m} is not a multiplier of at least 0"
            ));
        }
        None
    }

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
    /// `anthropic-beta` values passed to `anthropic` providers beside the built-in list (the
    /// betas Claude Code and the SDKs send for features Relay supports); any other is dropped.
    pub anthropic_betas: Vec<String>,
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
            anthropic_betas: Vec::new(),
        }
    }
}
