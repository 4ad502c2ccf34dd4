//! The one typed settings struct: defaults < TOML file < environment (CONTRACT.md, Operator interface).
//!
//! Each `[section]` is declared, with its defaults, in its own file; this one holds the top-level
//! struct, loading and the cross-field validation. Every struct with defaults has exactly one
//! `Default` impl and `#[serde(default)]`, so a missing key and a missing table mean the same
//! thing. Unknown keys and bad values stop start-up with a message naming them; store URLs are
//! redacted wherever they are printed.

mod accounts;
pub mod bind;
mod limits;
mod memory;
mod observability;
mod providers;
mod redact;
mod search;
mod server;
mod usage;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use accounts::{AuthConfig, QuotaPeriod, SignupMode};
pub use limits::LimitsConfig;
pub use memory::{DEFAULT_STORE_URL, EmbeddingsConfig, MemoryConfig};
pub use observability::TelemetryConfig;
pub use providers::{
    DEFAULT_STREAMS_PER_CONNECTION, FEATURES, FREE_TIERS, ModelConfig, ProviderConfig,
    ProviderKind, RoutingConfig,
};
pub use redact::redact_url;
pub use search::{SearchConfig, SearchKind};
pub use server::{CorsConfig, ServerConfig};
pub use usage::UsageConfig;

/// Everything `relay serve` and `relay users` read.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    #[serde(deserialize_with = "bind::deserialize")]
    pub bind: SocketAddr,
    /// The memory store.
    pub memory: MemoryConfig,
    /// The auth store; absent means open mode.
    pub auth: Option<AuthConfig>,
    /// Model providers; empty means "from the environment, else the demo provider".
    pub providers: Vec<ProviderConfig>,
    /// Models clients and routing can name.
    pub models: Vec<ModelConfig>,
    pub routing: RoutingConfig,
    /// The web search backend; absent means `/v1/search` answers 503.
    pub search: Option<SearchConfig>,
    /// Per-caller rate limits.
    pub limits: LimitsConfig,
    /// Cross-origin access; closed unless origins are listed.
    pub cors: CorsConfig,
    /// Trace export over OTLP; off unless an endpoint is given.
    pub telemetry: TelemetryConfig,
    /// Open mode only: host names (a `Host` header without its port, or with it) accepted besides
    /// `localhost`, `127.0.0.1` and `[::1]`; any other `Host` is 403, which defeats DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// Peers (CIDRs, e.g. `10.0.0.0/8`) whose `X-Forwarded-For` is believed: from them the client
    /// address is the right-most forwarded address that is not itself trusted. Empty: the TCP peer.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// On shutdown, in-flight requests get this long to finish; then each open leg ends with an
    /// `error` line (`retryable: true`) and the process exits.
    pub shutdown_grace_ms: u64,
    /// The usage ledger: on or off, retention and write batching.
    pub usage: UsageConfig,
    /// Where clients reach this server (`public_url`), request reading and the identity
    /// providers see.
    pub server: ServerConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 7711)),
            memory: MemoryConfig::default(),
            auth: None,
            providers: Vec::new(),
            models: Vec::new(),
            routing: RoutingConfig::default(),
            search: None,
            limits: LimitsConfig::default(),
            cors: CorsConfig::default(),
            allowed_hosts: Vec::new(),
            trusted_proxies: Vec::new(),
            shutdown_grace_ms: 10_000,
            telemetry: TelemetryConfig::default(),
            usage: UsageConfig::default(),
            server: ServerConfig::default(),
        }
    }
}

/// Why a configuration was refused. The message names the key or value at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("configuration file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("environment variable {name}: {message}")]
    Env { name: &'static str, message: String },
    #[error("configuration: {0}")]
    Invalid(String),
}

/// Where the environment overrides come from; a trait object so tests pass a map, not the process env.
pub trait Env {
    fn var(&self, name: &str) -> Option<String>;
}

/// The real process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl Config {
    /// Parse a TOML document; `origin` names it in error messages.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_owned(),
            // As written: toml's message spans lines (the offending line, a caret under it).
            message: format!("\n{}", e.to_string().trim_end()),
        })
    }

    /// Defaults, then the file (if any), then the environment; validated.
    pub fn load(file: Option<&Path>, env: &dyn Env) -> Result<Self, ConfigError> {
        let mut config = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                Self::from_toml(&text, path)?
            }
            None => Self::default(),
        };
        config.apply_env(env)?;
        config.validate()?;
        Ok(config)
    }

    fn apply_env(&mut self, env: &dyn Env) -> Result<(), ConfigError> {
        if let Some(bind) = env.var("RELAY_BIND") {
            self.bind = bind::resolve(&bind).map_err(|message| ConfigError::Env {
                name: "RELAY_BIND",
                message,
            })?;
        }
        if let Some(url) = env.var("RELAY_MEMORY_URL") {
            self.memory.url = url;
        }
        if let Some(url) = env.var("RELAY_AUTH_URL") {
            // Setting the auth store from the environment turns auth on, as a file `[auth]` table would.
            self.auth.get_or_insert_with(AuthConfig::default).url = url;
        }
        if let Some(endpoint) = env.var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            self.telemetry.otlp_endpoint = Some(endpoint);
        }
        Ok(())
    }

    /// Cross-field checks serde cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.memory.max_connections == 0 {
            return bad("memory.max_connections must be at least 1".into());
        }
        if let Some(problem) = self.server.problem() {
            return bad(problem);
        }
        if let Some(auth) = &self.auth {
            if auth.default_limit < -1 {
                return bad(format!(
                    "auth.default_limit must be -1 (unlimited) or a count, not {}",
                    auth.default_limit
                ));
            }
            if auth.default_token_budget < -1 {
                return bad(format!(
                    "auth.default_token_budget must be -1 (unlimited) or a count of tokens, not {}",
                    auth.default_token_budget
                ));
            }
            let spend = auth.default_spend_budget_usd;
            if !spend.is_finite() || (spend < 0.0 && spend != -1.0) {
                return bad(format!(
                    "auth.default_spend_budget_usd must be -1 (unlimited) or an amount in USD, not {spend}"
                ));
            }
            if auth.token_ttl_days == 0 {
                return bad("auth.token_ttl_days must be at least 1".into());
            }
            if auth.max_connections == 0 {
                return bad("auth.max_connections must be at least 1".into());
            }
            if auth.argon2_memory_kib < 8 || auth.argon2_iterations == 0 {
                return bad("auth.argon2_memory_kib must be at least 8 and auth.argon2_iterations at least 1".into());
            }
            if auth.device_code_ttl_secs == 0
                || auth.access_token_ttl_secs == 0
                || auth.refresh_token_ttl_days == 0
            {
                return bad("auth.device_code_ttl_secs, auth.access_token_ttl_secs and auth.refresh_token_ttl_days must be at least 1".into());
            }
            if self.server.public_url.is_none() && !self.bind.ip().is_loopback() {
                return bad(format!(
                    "[server] public_url is required with [auth] when binding to {} (not loopback): \
                     it is the address sign-in links and the device flow send browsers and agents to, \
                     e.g. public_url = \"https://relay.example.com\"",
                    self.bind
                ));
            }
        }
        if let Some(url) = &self.server.public_url {
            let ok = (url.starts_with("https://") || url.starts_with("http://"))
                && url.len() > "https://".len()
                && !url.contains(['?', '#', ' ']);
            if !ok {
                return bad(format!(
                    "server.public_url must be an absolute http(s) URL without query, like https://relay.example.com, not `{url}`"
                ));
            }
        }
        let limits = &self.limits;
        for (name, value) in [
            ("limits.agent_per_minute", limits.agent_per_minute),
            ("limits.agent_burst", limits.agent_burst),
            ("limits.suggest_per_minute", limits.suggest_per_minute),
            ("limits.suggest_burst", limits.suggest_burst),
            ("limits.signin_failures", limits.signin_failures),
            ("limits.signups_per_hour", limits.signups_per_hour),
        ] {
            if value == 0 {
                return bad(format!("{name} must be at least 1"));
            }
        }
        if limits.signin_window_secs == 0 {
            return bad("limits.signin_window_secs must be at least 1".into());
        }
        let mut names = std::collections::HashSet::new();
        for p in &self.providers {
            if !names.insert(p.name.as_str()) {
                return bad(format!("providers: the name `{}` is used twice", p.name));
            }
            if p.kind == ProviderKind::Openai && p.base_url.is_none() && p.api_key_env.is_none() {
                return bad(format!(
                    "providers `{}`: an openai provider needs base_url (a compatible server) or api_key_env",
                    p.name
                ));
            }
            if p.streams_per_connection == 0 {
                return bad(format!(
                    "providers `{}`: streams_per_connection must be at least 1",
                    p.name
                ));
            }
        }
        if let Some(e) = &self.memory.embeddings {
            let kind = self
                .providers
                .iter()
                .find(|p| p.name == e.provider)
                .map(|p| p.kind);
            if !matches!(
                kind,
                Some(ProviderKind::Openai | ProviderKind::OpenaiResponses)
            ) {
                return bad(format!(
                    "memory.embeddings: provider `{}` must be an openai or openai_responses provider among [[providers]] (one that serves POST /v1/embeddings)",
                    e.provider
                ));
            }
            if e.model.trim().is_empty() {
                return bad(
                    "memory.embeddings: model must name the provider's embedding model".into(),
                );
            }
        }
        if self.memory.embed_timeout_ms == 0 {
            return bad("memory.embed_timeout_ms must be at least 1".into());
        }
        let mut model_names = std::collections::HashSet::new();
        for m in &self.models {
            if m.name == "auto" {
                return bad(
                    "models: `auto` is reserved for routing and cannot name a model".into(),
                );
            }
            if !model_names.insert(m.name.as_str()) {
                return bad(format!("models: the name `{}` is used twice", m.name));
            }
            if let Some(problem) = m.policy_problem() {
                return bad(format!("models `{}`: {problem}", m.name));
            }
            for (key, price) in m.prices() {
                if price.is_some_and(|p| !(p.is_finite() && p >= 0.0)) {
                    return bad(format!(
                        "models `{}`: {key} must be a number of USD per million tokens, at least 0",
                        m.name
                    ));
                }
            }
            if !self.providers.iter().any(|p| p.name == m.provider) {
                return bad(format!(
                    "models `{}`: provider `{}` is not among [[providers]]",
                    m.name, m.provider
                ));
            }
        }
        for name in self.routing.auto.iter().chain(self.routing.suggest.iter()) {
            if !self.models.iter().any(|m| &m.name == name) {
                return bad(format!("routing: model `{name}` is not among [[models]]"));
            }
        }
        if self.routing.idle_timeout_ms == 0 || self.routing.ping_interval_ms == 0 {
            return bad(
                "routing.idle_timeout_ms and routing.ping_interval_ms must be at least 1".into(),
            );
        }
        if self.routing.retries > 5 {
            return bad("routing.retries must be at most 5".into());
        }
        // Below 64 KiB, ordinary tool-call arguments would end legs; above 1 GiB one provider
        // could hold that much memory per leg.
        if !(64 * 1024..=1024 * 1024 * 1024).contains(&self.routing.max_event_bytes) {
            return bad(format!(
                "routing.max_event_bytes must be between 65536 (64 KiB) and 1073741824 (1 GiB), not {}",
                self.routing.max_event_bytes
            ));
        }
        let default_token_budget = self.auth.as_ref().map_or(-1, |a| {
            if a.default_spend_budget_usd >= 0.0 {
                0
            } else {
                a.default_token_budget
            }
        });
        if let Some(problem) = self.usage.problem_with(default_token_budget) {
            return bad(problem);
        }
        if let Some(search) = &self.search
            && search.kind == SearchKind::Searxng
            && search.base_url.is_none()
        {
            return bad("search: kind `searxng` needs base_url".into());
        }
        for origin in &self.cors.allow_origins {
            if origin != "*" && !(origin.starts_with("http://") || origin.starts_with("https://")) {
                return bad(format!(
                    "cors.allow_origins: `{origin}` is not an origin like https://example.com"
                ));
            }
        }
        Ok(())
    }

    /// True without an auth store: every endpoint is open and the caller is `local`.
    pub fn open_mode(&self) -> bool {
        self.auth.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct MapEnv(HashMap<&'static str, &'static str>);
    impl Env for MapEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| (*v).to_owned())
        }
    }

    #[test]
    fn defaults_are_loopback_7711_sqlite_open_mode() {
        let c = Config::load(None, &MapEnv(HashMap::new())).unwrap();
        assert_eq!(c.bind.to_string(), "127.0.0.1:7711");
        assert_eq!(c.memory.url, "sqlite://relay-data/relay.db");
        assert!(c.open_mode());
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::from_toml("bind = \"127.0.0.1:1\"\nbnid = 3\n", Path::new("x.toml"))
            .unwrap_err();
        assert!(err.to_string().contains("bnid"), "{err}");
        let err =
            Config::from_toml("[auth]\nsingup = \"open\"\n", Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("singup"), "{err}");
    }

    #[test]
    fn bad_value_is_named() {
        let err =
            Config::from_toml("[auth]\nsignup = \"maybe\"\n", Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("maybe"), "{err}");
        let err = Config::from_toml("bind = \"nowhere\"\n", Path::new("x.toml")).unwrap_err();
        assert!(
            err.to_string().contains("bind") || err.to_string().contains("nowhere"),
            "{err}"
        );
    }

    #[test]
    fn environment_overrides_file() {
        let env = MapEnv(HashMap::from([
            ("RELAY_BIND", "127.0.0.1:9000"),
            ("RELAY_AUTH_URL", "sqlite://other.db"),
        ]));
        let mut c = Config::from_toml("bind = \"127.0.0.1:1\"\n", Path::new("x")).unwrap();
        c.apply_env(&env).unwrap();
        assert_eq!(c.bind.port(), 9000);
        assert_eq!(c.auth.unwrap().url, "sqlite://other.db");
        let err = Config::default().apply_env(&MapEnv(HashMap::from([("RELAY_BIND", "x")])));
        assert!(err.unwrap_err().to_string().contains("RELAY_BIND"));
    }

    #[test]
    fn new_top_level_settings_parse_and_a_bad_cidr_is_named() {
        let c = Config::from_toml(
            "trusted_proxies = [\"10.0.0.0/8\", \"127.0.0.1/32\"]\nallowed_hosts = [\"relay.lan\"]\n\
             shutdown_grace_ms = 500\n[limits]\nsignups_per_hour = 5\n",
            Path::new("x"),
        )
        .unwrap();
        assert_eq!(c.trusted_proxies.len(), 2);
        assert_eq!(c.allowed_hosts, ["relay.lan"]);
        assert_eq!((c.shutdown_grace_ms, c.limits.signups_per_hour), (500, 5));
        assert_eq!(Config::default().shutdown_grace_ms, 10_000);
        assert_eq!(Config::default().limits.signups_per_hour, 20);
        let err = Config::from_toml("trusted_proxies = [\"10.0.0.0/33\"]\n", Path::new("x"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("trusted_proxies"), "{err}");
    }

    #[test]
    fn routing_to_an_unknown_model_is_refused() {
        let c = Config::from_toml("[routing]\nauto = [\"gpt-9\"]\n", Path::new("x")).unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("gpt-9"));
    }

    #[test]
    fn the_event_cap_defaults_to_4_mib_and_is_bounded() {
        assert_eq!(Config::default().routing.max_event_bytes, 4 * 1024 * 1024);
        let c = Config::from_toml("[routing]\nmax_event_bytes = 100\n", Path::new("x")).unwrap();
        let message = c.validate().unwrap_err().to_string();
        assert!(message.contains("routing.max_event_bytes"), "{message}");
        let c = Config::from_toml("[routing]\nmax_event_bytes = 65536\n", Path::new("x")).unwrap();
        assert!(c.validate().is_ok());
    }
}
