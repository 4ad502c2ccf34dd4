//! The models clients can name, each bound to its provider, and the `auto` chain.
//!
//! Built once at start-up from `[[providers]]`, `[[models]]` and `[routing]`. With no providers
//! configured, the keys in the environment decide (OpenAI, Anthropic, Gemini), and with none of
//! those the offline `demo` provider serves every leg.

use std::sync::Arc;

use crate::config::{Config, Env, ModelConfig, ProviderConfig, ProviderKind};
use crate::providers::anthropic::AnthropicProvider;
use crate::providers::demo::DemoProvider;
use crate::providers::gemini::GeminiProvider;
use crate::providers::openai::OpenAiProvider;
use crate::providers::transport::lanes::{ClientSettings, Lanes};
use crate::providers::{self, Provider};

/// One model a leg can be routed to.
pub struct ModelEntry {
    /// The configured name (`[[models]] name`): what clients send and `start` reports.
    pub name: String,
    /// The provider's own name for it.
    pub upstream: String,
    pub provider_name: String,
    pub provider: Arc<dyn Provider>,
    /// What a client may ask of this model beyond a plain call (`policy`).
    pub policy: crate::policy::ModelPolicy,
}

/// Every model, the `auto` chain, and the suggestion model.
pub struct Models {
    entries: Vec<Arc<ModelEntry>>,
    auto: Vec<Arc<ModelEntry>>,
    suggest: Option<Arc<ModelEntry>>,
    /// How providers were chosen, for the start-up line.
    pub summary: String,
    /// True when nothing was configured and the demo provider serves every leg.
    pub demo_only: bool,
}

/// The environment variables that configure a provider when `[[providers]]` is empty, and the model
/// each brings (used as both the Relay name and the upstream name).
const FROM_ENV: [(&str, ProviderKind, &str); 3] = [
    ("OPENAI_API_KEY", ProviderKind::Openai, "gpt-4.1"),
    (
        "ANTHROPIC_API_KEY",
        ProviderKind::Anthropic,
        "claude-sonnet-4-5",
    ),
    ("GEMINI_API_KEY", ProviderKind::Gemini, "gemini-2.5-flash"),
];

impl Models {
    pub fn from_config(config: &Config, env: &dyn Env) -> anyhow::Result<Self> {
        let (providers, models, auto, demo_only) = if config.providers.is_empty() {
            let mut providers = Vec::new();
            let mut models = Vec::new();
            for (var, kind, model) in FROM_ENV {
                if env.var(var).is_some() {
                    let name = kind.as_str().to_owned();
                    providers.push(ProviderConfig {
                        api_key_env: Some(var.to_owned()),
                        ..ProviderConfig::new(name.clone(), kind)
                    });
                    models.push(ModelConfig {
                        name: model.to_owned(),
                        provider: name,
                        upstream: model.to_owned(),
                        ..Default::default()
                    });
                }
            }
            let demo_only = providers.is_empty();
            if demo_only {
                providers.push(ProviderConfig::new("demo", ProviderKind::Demo));
                models.push(ModelConfig {
                    name: "demo".into(),
                    provider: "demo".into(),
                    upstream: "demo".into(),
                    ..Default::default()
                });
            }
            let auto = models.iter().map(|m| m.name.clone()).collect();
            (providers, models, auto, demo_only)
        } else {
            let auto = if config.routing.auto.is_empty() {
                config.models.iter().map(|m| m.name.clone()).collect()
            } else {
                config.routing.auto.clone()
            };
            (config.providers.clone(), config.models.clone(), auto, false)
        };

        let mut built: Vec<(String, Arc<dyn Provider>)> = Vec::new();
        // One TLS configuration (and so one copy of the system's trust store) for every provider
        // that trusts the system's roots.
        let mut system_tls = None;
        let max_event = usize::try_from(config.routing.max_event_bytes).unwrap_or(usize::MAX);
        for p in &providers {
            built.push((
                p.name.clone(),
                build_provider(p, env, &mut system_tls, max_event)?,
            ));
        }
        let mut entries = Vec::new();
        for m in &models {
            let provider = built
                .iter()
                .find(|(name, _)| *name == m.provider)
                .map(|(_, p)| p.clone())
                .ok_or_else(|| {
                    anyhow::anyhow!("models `{}`: no provider `{}`", m.name, m.provider)
                })?;
            entries.push(Arc::new(ModelEntry {
                name: m.name.clone(),
                upstream: m.upstream.clone(),
                provider_name: m.provider.clone(),
                provider,
                policy: crate::policy::ModelPolicy::of(m),
            }));
        }
        let find = |name: &str| entries.iter().find(|e| e.name == name).cloned();
        let auto = auto.iter().filter_map(|n| find(n)).collect();
        let suggest = config.routing.suggest.as_deref().and_then(find);
        let summary = if demo_only {
            "demo (built-in, offline: no [[providers]] and no OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY)"
                .to_owned()
        } else {
            providers
                .iter()
                .map(|p| format!("{} ({})", p.name, p.kind.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Ok(Self {
            entries,
            auto,
            suggest,
            summary,
            demo_only,
        })
    }

    /// The models to try for a request's `model`: the `auto` chain, or the named one.
    pub fn resolve(&self, model: Option<&str>) -> Option<Vec<Arc<ModelEntry>>> {
        match model {
            None | Some("auto") => Some(self.auto.clone()),
            Some(name) => self
                .entries
                .iter()
                .find(|e| e.name == name)
                .map(|e| vec![e.clone()]),
        }
    }

    pub fn suggest(&self) -> Option<&Arc<ModelEntry>> {
        self.suggest.as_ref()
    }

    /// Every configured model, in configuration order.
    pub fn entries(&self) -> &[Arc<ModelEntry>] {
        &self.entries
    }

    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.name.as_str()).collect()
    }
}

fn build_provider(
    p: &ProviderConfig,
    env: &dyn Env,
    system_tls: &mut Option<ClientSettings>,
    max_event: usize,
) -> anyhow::Result<Arc<dyn Provider>> {
    let key = match &p.api_key_env {
        Some(var) => Some(env.var(var).ok_or_else(|| {
            anyhow::anyhow!(
                "providers `{}`: the environment variable {var} (api_key_env) is not set",
                p.name
            )
        })?),
        None => None,
    };
    let base = |default: &str| p.base_url.clone().unwrap_or_else(|| default.to_owned());
    let mut lanes = || lanes_for(p, system_tls, max_event);
    Ok(match p.kind {
        ProviderKind::Openai => Arc::new(OpenAiProvider::new(
            base(providers::openai::DEFAULT_BASE_URL),
            key,
            lanes()?,
        )),
        ProviderKind::OpenaiResponses => {
            Arc::new(providers::openai_responses::OpenAiResponsesProvider::new(
                base(providers::openai_responses::DEFAULT_BASE_URL),
                key,
                lanes()?,
            ))
        }
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(
            base(providers::anthropic::DEFAULT_BASE_URL),
            key,
            lanes()?,
        )),
        ProviderKind::Gemini => Arc::new(GeminiProvider::new(
            base(providers::gemini::DEFAULT_BASE_URL),
            key,
            lanes()?,
        )),
        ProviderKind::Demo => Arc::new(DemoProvider::new()),
    })
}

/// The clients `p`'s legs go out on: its `ca_file`'s roots, else the system's (one configuration
/// shared by every such provider, kept in `system_tls`).
fn lanes_for(
    p: &ProviderConfig,
    system_tls: &mut Option<ClientSettings>,
    max_event: usize,
) -> anyhow::Result<Arc<Lanes>> {
    let settings = match &p.ca_file {
        Some(path) => ClientSettings::with_ca_file(path)
            .map_err(|e| anyhow::anyhow!("providers `{}`: {e}", p.name))?,
        None => match system_tls {
            Some(settings) => settings.clone(),
            None => system_tls.insert(ClientSettings::system()?).clone(),
        },
    };
    // HTTP/1.1 has no stream limit to respect (each leg has a connection of its own), and one
    // pool keeps every idle connection reusable: a plain `http://` provider gets a single lane.
    let plain = p
        .base_url
        .as_deref()
        .is_some_and(|b| b.trim_start().starts_with("http://"));
    let per_connection = if plain {
        usize::MAX
    } else {
        p.streams_per_connection
    };
    Ok(Arc::new(
        Lanes::new(settings, per_connection)?.with_max_event_bytes(max_event),
    ))
}
