//! The state every handler shares: configuration, stores, and the services built from them.
//!
//! Handlers and middleware depend on this module, never on `app` (which assembles the router over
//! it), so the dependency arrows point one way: `app` -> `routes` -> handlers -> `state`.

use std::sync::Arc;
use std::time::Duration;

use crate::accounts::password::Passwords;
use crate::config::{Config, Env};
use crate::legs::{Deps, Legs};
use crate::limits::Limits;
use crate::limits::redis::SharedStore;
use crate::limits::signin::SigninThrottle;
use crate::metrics::registry::Metrics;
use crate::providers::registry::Models;
use crate::search::{SearchBackend, from_config as search_from_config};
use crate::store::signin::SignInStore;
use crate::store::{AuthStore, Backend, MemoryStore, Stores};

/// Shared by every handler; cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    config: Config,
    auth: Option<Arc<dyn AuthStore>>,
    signin: Option<Arc<dyn SignInStore>>,
    memory: Backend,
    passwords: Passwords,
    signin_throttle: SigninThrottle,
    metrics: Arc<Metrics>,
    /// `/openapi.json` as served, rendered once at start-up.
    openapi_json: String,
    limits: Limits,
    shared_limits: Option<Arc<SharedStore>>,
    search: Option<Arc<dyn SearchBackend>>,
    /// The leg service: the models, the ledger, and what runs a leg.
    legs: Legs,
    /// `[server] identity_secret`, else the one stored on first start (`identity`).
    identity_secret: tokio::sync::OnceCell<String>,
    /// The clock calendar periods are counted by (a test moves it past a month's end); the leg
    /// service shares it.
    clock: Arc<crate::clock::Clock>,
    /// `[auth] quota_period` and the month this instance last rolled the quota to.
    quota_month: Arc<crate::usage::period::QuotaMonth>,
    /// Where agents' OTLP exports go (`[telemetry] otlp_endpoint`).
    telemetry: crate::agent_telemetry::Forwarder,
}

impl AppState {
    /// Builds the state over opened `stores`; `env` supplies provider keys and the Redis password,
    /// `openapi_json` is the rendered document of the routes the router serves.
    pub fn new(
        config: Config,
        stores: Stores,
        env: &dyn Env,
        openapi_json: String,
    ) -> anyhow::Result<Self> {
        let models = Models::from_config(&config, env)?;
        let metrics = Metrics::new();
        let shared_limits = match &config.limits.url {
            Some(url) => Some(Arc::new(SharedStore::open(
                url,
                &config.limits.prefix,
                env.var("REDIS_PASSWORD"),
                metrics.limits_store_errors.clone(),
            )?)),
            None => None,
        };
        let limits = Limits::new(&config.limits, shared_limits.as_ref());
        let search = search_from_config(config.search.as_ref(), env)?;
        let (memory_kib, iterations) = config
            .auth
            .as_ref()
            .map_or((19_456, 2), |a| (a.argon2_memory_kib, a.argon2_iterations));
        let passwords = Passwords::new(memory_kib, iterations)?;
        let signin_throttle = SigninThrottle::new(
            config.limits.signin_failures,
            Duration::from_secs(config.limits.signin_window_secs),
        )
        .shared(shared_limits.as_ref());
        let mut memory = stores.memory;
        memory.memory = crate::embeddings::wrap(&config, memory.memory, env)?;
        let ledger = crate::usage::Ledger::start(
            memory.usage.clone(),
            &config.usage,
            crate::usage::PriceList::from_models(&config.models),
            metrics.clone(),
        );
        let quota_month = crate::usage::period::QuotaMonth::new(
            config
                .auth
                .as_ref()
                .map_or(crate::config::QuotaPeriod::Never, |a| a.quota_period),
        );
        let clock = Arc::new(crate::clock::Clock::default());
        let quota_month = Arc::new(quota_month);
        let legs = Legs::new(Deps {
            routing: config.routing.clone(),
            memory_config: config.memory.clone(),
            drain: Duration::from_millis(config.usage.drain_ms),
            budget_defaults: (!config.open_mode()).then(|| {
                config
                    .auth
                    .as_ref()
                    .map(crate::usage::budget::Defaults::of)
                    .unwrap_or(crate::usage::budget::Defaults {
                        tokens: -1,
                        spend_usd: -1.0,
                    })
            }),
            models,
            metrics: metrics.clone(),
            ledger,
            rate_limit: limits.agent.clone(),
            memory: memory.memory.clone(),
            auth: if config.open_mode() {
                None
            } else {
                stores.auth.clone()
            },
            clock: clock.clone(),
            quota_month: quota_month.clone(),
        });
        let telemetry =
            crate::agent_telemetry::Forwarder::new(config.telemetry.otlp_endpoint.as_deref())?;
        Ok(Self(Arc::new(Inner {
            telemetry,
            auth: if config.open_mode() {
                None
            } else {
                stores.auth
            },
            signin: if config.open_mode() {
                None
            } else {
                stores.signin
            },
            memory,
            config,
            passwords,
            signin_throttle,
            metrics,
            openapi_json,
            limits,
            shared_limits,
            search,
            legs,
            identity_secret: tokio::sync::OnceCell::new(),
            clock,
            quota_month,
        })))
    }

    /// The identifier providers see for an account (`policy::Identity`), keyed by
    /// `[server] identity_secret` or, without one, by a secret generated on first start and
    /// kept in the store so that every instance sends the same.
    pub async fn identity(
        &self,
        user_id: &str,
    ) -> Result<crate::policy::Identity, crate::error::ApiError> {
        let secret = self
            .0
            .identity_secret
            .get_or_try_init(|| async {
                match &self.0.config.server.identity_secret {
                    Some(secret) => Ok(secret.clone()),
                    None => {
                        let fresh = format!(
                            "{:032x}{:032x}",
                            rand::random::<u128>(),
                            rand::random::<u128>()
                        );
                        self.ledger()
                            .store()
                            .setting_or_init("identity_secret", &fresh)
                            .await
                    }
                }
            })
            .await?;
        Ok(crate::policy::Identity::of(secret, user_id))
    }

    /// The clock the quota's month is counted by.
    pub fn clock(&self) -> &crate::clock::Clock {
        &self.0.clock
    }

    /// The quota's period, and its roll-over into a new month.
    pub fn quota_month(&self) -> &crate::usage::period::QuotaMonth {
        &self.0.quota_month
    }

    /// Sets quota counts of an earlier month back to 0 when the clock has entered a new one
    /// (once per month per instance); true when it ran.
    pub async fn roll_quota(&self) -> crate::store::StoreResult<bool> {
        self.0.legs.roll_quota().await
    }

    pub fn config(&self) -> &Config {
        &self.0.config
    }
    /// Agents' sign-in store (device codes, refresh tokens, API keys); `None` in open mode.
    pub fn signin(&self) -> Option<&Arc<dyn SignInStore>> {
        self.0.signin.as_ref()
    }
    /// The auth store; `None` in open mode.
    pub fn auth(&self) -> Option<&Arc<dyn AuthStore>> {
        self.0.auth.as_ref()
    }
    pub fn memory(&self) -> &Arc<dyn MemoryStore> {
        &self.0.memory.memory
    }
    /// Where waitlist signups go: the auth store, or in open mode the memory store's database.
    pub fn waitlist_store(&self) -> &Arc<dyn AuthStore> {
        self.0.auth.as_ref().unwrap_or(&self.0.memory.auth)
    }
    pub fn passwords(&self) -> &Passwords {
        &self.0.passwords
    }
    pub fn signin_throttle(&self) -> &SigninThrottle {
        &self.0.signin_throttle
    }
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }
    /// The OpenAPI document, as `/openapi.json` serves it.
    pub fn openapi_json(&self) -> &str {
        &self.0.openapi_json
    }
    pub fn models(&self) -> &Models {
        self.0.legs.models()
    }
    /// The leg service every agent route runs its legs through.
    pub fn legs(&self) -> &Legs {
        &self.0.legs
    }
    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }
    /// The Redis store that shares limits across instances; `None` without `[limits] url`.
    pub fn shared_limits(&self) -> Option<&Arc<SharedStore>> {
        self.0.shared_limits.as_ref()
    }
    /// The web search backend; `None` without `[search]`.
    pub fn search(&self) -> Option<&Arc<dyn SearchBackend>> {
        self.0.search.as_ref()
    }

    /// The usage ledger: where legs' records go, and its store.
    /// `[auth]`'s default budgets in auth mode; `None` in open mode, where `local` has no budget.
    pub fn budget_defaults(&self) -> Option<crate::usage::budget::Defaults> {
        self.0.legs.budget_defaults()
    }

    /// Where agents' OTLP exports go.
    pub fn telemetry(&self) -> &crate::agent_telemetry::Forwarder {
        &self.0.telemetry
    }

    pub fn ledger(&self) -> &crate::usage::Ledger {
        self.0.legs.ledger()
    }

    /// Resolves once open legs must end (`shutdown::serve_bounded`).
    pub fn legs_stop(&self) -> &tokio_util::sync::CancellationToken {
        self.0.legs.stopping()
    }

    /// Tells every open leg to end now.
    pub fn stop_legs(&self) {
        self.0.legs.stop();
    }

    /// The providers line of the start-up summary.
    pub fn providers_summary(&self) -> String {
        self.models().summary.clone()
    }
}
