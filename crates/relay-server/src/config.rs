//! The one typed settings struct: defaults < TOML file < environment (CONTRACT.md, Operator interface).
//!
//! Unknown keys and bad values stop start-up with a message naming them; store URLs are redacted
//! wherever they are printed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Everything `relay serve` and `relay users` read.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    #[serde(default = "default_bind")]
    pub bind: SocketAddr,
    /// The memory store.
    #[serde(default)]
    pub memory: MemoryConfig,
    /// The auth store; absent means open mode.
    #[serde(default)]
    pub auth: Option<AuthConfig>,
    /// Model providers; empty means "from the environment, else the demo provider".
    #[serde(default)]
    pub providers: Vec<ProviderConfig>,
    /// Models clients and routing can name.
    #[serde(default)]
    pub models: Vec<ModelConfig>,
    #[serde(default)]
    pub routing: RoutingConfig,
    /// The web search backend; absent means `/v1/search` answers 503.
    #[serde(default)]
    pub search: Option<SearchConfig>,
    /// Per-caller rate limits.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Cross-origin access; closed unless origins are listed.
    #[serde(default)]
    pub cors: CorsConfig,
    /// Trace export over OTLP; off unless an endpoint is given.
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// Open mode only: host names (a `Host` header without its port, or with it) accepted besides
    /// `localhost`, `127.0.0.1` and `[::1]`; any other `Host` is 403, which defeats DNS rebinding.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Peers (CIDRs, e.g. `10.0.0.0/8`) whose `X-Forwarded-For` is believed: from them the client
    /// address is the right-most forwarded address that is not itself trusted. Empty: the TCP peer.
    #[serde(default)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// On shutdown, in-flight requests get this long to finish; then each open leg ends with an
    /// `error` line (`retryable: true`) and the process exits.
    #[serde(default = "default_shutdown_grace_ms")]
    pub shutdown_grace_ms: u64,
}

fn default_shutdown_grace_ms() -> u64 {
    10_000
}

fn default_bind() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7711))
}

/// The default store: one SQLite file in the data directory.
pub const DEFAULT_STORE_URL: &str = "sqlite://relay-data/relay.db";

fn default_store_url() -> String {
    DEFAULT_STORE_URL.to_owned()
}

/// `[memory]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// `sqlite://PATH` or `postgres://…`.
    #[serde(default = "default_store_url")]
    pub url: String,
    /// Connection pool size.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// How long a store call waits for a lock or a connection before the store counts as unavailable.
    #[serde(default = "default_busy_timeout_ms")]
    pub busy_timeout_ms: u64,
    /// How many of a project's newest notes recall returns.
    #[serde(default = "default_recall_limit")]
    pub recall_limit: u32,
    /// Injection budget: at most this many notes per leg.
    #[serde(default = "default_inject_max_notes")]
    pub inject_max_notes: u32,
    /// Injection budget: at most this many characters of notes per leg.
    #[serde(default = "default_inject_max_chars")]
    pub inject_max_chars: u32,
    /// A memory store slower than this injects nothing and the leg goes on.
    #[serde(default = "default_inject_deadline_ms")]
    pub inject_deadline_ms: u64,
}

fn default_max_connections() -> u32 {
    8
}
fn default_busy_timeout_ms() -> u64 {
    5_000
}
fn default_recall_limit() -> u32 {
    200
}
fn default_inject_max_notes() -> u32 {
    8
}
fn default_inject_max_chars() -> u32 {
    6_000
}
fn default_inject_deadline_ms() -> u64 {
    250
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            url: default_store_url(),
            max_connections: default_max_connections(),
            busy_timeout_ms: default_busy_timeout_ms(),
            recall_limit: default_recall_limit(),
            inject_max_notes: default_inject_max_notes(),
            inject_max_chars: default_inject_max_chars(),
            inject_deadline_ms: default_inject_deadline_ms(),
        }
    }
}

/// `[auth]`: present means accounts, tokens and quota are enforced.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default = "default_store_url")]
    pub url: String,
    #[serde(default)]
    pub signup: SignupMode,
    /// Quota of a new account; -1 is unlimited.
    #[serde(default = "default_limit")]
    pub default_limit: i64,
    #[serde(default = "default_token_ttl_days")]
    pub token_ttl_days: u32,
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    #[serde(default = "default_busy_timeout_ms")]
    pub busy_timeout_ms: u64,
    /// Argon2id memory cost in KiB. The default is OWASP's current minimum (19 MiB, 2 passes, 1 lane).
    #[serde(default = "default_argon2_memory_kib")]
    pub argon2_memory_kib: u32,
    /// Argon2id passes.
    #[serde(default = "default_argon2_iterations")]
    pub argon2_iterations: u32,
}

fn default_limit() -> i64 {
    100
}
fn default_token_ttl_days() -> u32 {
    30
}
fn default_argon2_memory_kib() -> u32 {
    19_456
}
fn default_argon2_iterations() -> u32 {
    2
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            url: default_store_url(),
            signup: SignupMode::Open,
            default_limit: default_limit(),
            token_ttl_days: default_token_ttl_days(),
            max_connections: default_max_connections(),
            busy_timeout_ms: default_busy_timeout_ms(),
            argon2_memory_kib: default_argon2_memory_kib(),
            argon2_iterations: default_argon2_iterations(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignupMode {
    #[default]
    Open,
    Closed,
}

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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub name: String,
    pub provider: String,
    pub upstream: String,
}

/// `[routing]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingConfig {
    /// Models tried in order for `model: "auto"`.
    #[serde(default)]
    pub auto: Vec<String>,
    /// The model behind `/v1/suggest`; absent means history only.
    #[serde(default)]
    pub suggest: Option<String>,
    /// Deadline for a model suggestion.
    #[serde(default = "default_suggest_deadline_ms")]
    pub suggest_deadline_ms: u64,
    /// An upstream silent this long (before or during a leg) ends it: before output the next model
    /// is tried, after the headers an `error` line ends the leg.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// A `ping` line is sent after this long without another line.
    #[serde(default = "default_ping_interval_ms")]
    pub ping_interval_ms: u64,
    /// Tries per model before the leg moves to the next one.
    #[serde(default = "default_retries")]
    pub retries: u32,
}

fn default_suggest_deadline_ms() -> u64 {
    400
}
fn default_idle_timeout_ms() -> u64 {
    120_000
}
fn default_ping_interval_ms() -> u64 {
    15_000
}
fn default_retries() -> u32 {
    1
}

/// `[search]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    pub kind: SearchKind,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default = "default_search_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_search_timeout_ms() -> u64 {
    5_000
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchKind {
    Searxng,
    Brave,
    Tavily,
}

/// `[limits]`: the contract's default per-caller rate limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    #[serde(default = "default_agent_per_minute")]
    pub agent_per_minute: u32,
    #[serde(default = "default_agent_burst")]
    pub agent_burst: u32,
    #[serde(default = "default_suggest_per_minute")]
    pub suggest_per_minute: u32,
    #[serde(default = "default_suggest_burst")]
    pub suggest_burst: u32,
    /// Failed signins allowed per email and per client address in `signin_window_secs`.
    #[serde(default = "default_signin_failures")]
    pub signin_failures: u32,
    /// The window of `signin_failures`: a lock lasts until the oldest counted failure is this old.
    #[serde(default = "default_signin_window_secs")]
    pub signin_window_secs: u64,
    /// Signups allowed per client address in an hour (each one costs an Argon2id hash).
    #[serde(default = "default_signups_per_hour")]
    pub signups_per_hour: u32,
    /// A Redis server (`redis://` or `rediss://`) that shares these limits across instances;
    /// absent: each instance counts in its own memory.
    #[serde(default)]
    pub url: Option<String>,
    /// Key prefix in Redis, so several deployments can share one server.
    #[serde(default = "default_limits_prefix")]
    pub prefix: String,
}

fn default_signups_per_hour() -> u32 {
    20
}

fn default_limits_prefix() -> String {
    "relay".to_owned()
}

fn default_agent_per_minute() -> u32 {
    120
}
fn default_agent_burst() -> u32 {
    30
}
fn default_suggest_per_minute() -> u32 {
    300
}
fn default_suggest_burst() -> u32 {
    20
}
fn default_signin_failures() -> u32 {
    10
}
fn default_signin_window_secs() -> u64 {
    900
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            agent_per_minute: default_agent_per_minute(),
            agent_burst: default_agent_burst(),
            suggest_per_minute: default_suggest_per_minute(),
            suggest_burst: default_suggest_burst(),
            signin_failures: default_signin_failures(),
            signin_window_secs: default_signin_window_secs(),
            signups_per_hour: default_signups_per_hour(),
            url: None,
            prefix: default_limits_prefix(),
        }
    }
}

/// `[cors]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorsConfig {
    /// Origins allowed to call the API from a browser; empty keeps CORS closed.
    #[serde(default)]
    pub allow_origins: Vec<String>,
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

impl Default for Config {
    fn default() -> Self {
        Self {
            bind: default_bind(),
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
            shutdown_grace_ms: default_shutdown_grace_ms(),
            telemetry: crate::telemetry::TelemetryConfig::default(),
        }
    }
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            auto: Vec::new(),
            suggest: None,
            suggest_deadline_ms: default_suggest_deadline_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            ping_interval_ms: default_ping_interval_ms(),
            retries: default_retries(),
        }
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
            self.bind = bind.parse().map_err(|_| ConfigError::Env {
                name: "RELAY_BIND",
                message: format!("`{bind}` is not an address like 127.0.0.1:7711"),
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
        if let Some(auth) = &self.auth {
            if auth.default_limit < -1 {
                return bad(format!(
                    "auth.default_limit must be -1 (unlimited) or a count, not {}",
                    auth.default_limit
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

/// A store URL with any password replaced, fit for logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            let tail = redact_query(tail);
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{tail}")
            } else {
                format!("{scheme}://{user}@{host}{tail}")
            }
        }
        None => format!("{scheme}://{authority}{}", redact_query(tail)),
    }
}

/// `?password=…` in a query string is a credential too.
fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_owned();
    };
    let parts: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => kv.to_owned(),
        })
        .collect();
    format!("{path}?{}", parts.join("&"))
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
    fn redaction_hides_passwords_only() {
        assert_eq!(
            redact_url("postgres://bob:hunter2@db:5432/relay"),
            "postgres://bob:***@db:5432/relay"
        );
        assert_eq!(
            redact_url("postgres://bob@db/relay"),
            "postgres://bob@db/relay"
        );
        assert_eq!(
            redact_url("sqlite://relay-data/relay.db"),
            "sqlite://relay-data/relay.db"
        );
        assert_eq!(
            redact_url("postgres://db/relay?user=a&password=b"),
            "postgres://db/relay?user=a&password=***"
        );
    }
}
