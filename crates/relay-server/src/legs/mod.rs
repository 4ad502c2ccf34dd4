//! The agent leg as a service below HTTP: validation, the caller's gate, quota and budget
//! admission, note injection, the model chain with fallback, the stream with its tool-call rules,
//! and the hand-off to the usage ledger.
//!
//! Fail early, fail late in-band: everything up to the first provider output happens in
//! `Legs::open`, so a failing model can be replaced by the next and a refusal is an error value;
//! after that every failure is one terminal `error` event. The native endpoint and the compatible
//! doors (`http/`) only encode what a leg yields. `Legs` holds its dependencies explicitly, so a
//! leg can be opened and driven without HTTP (see `tests`).

mod calls;
mod inject;
mod open;
mod quota;
mod raw;
mod request;
mod stream;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use relay_wire::ErrorCode;
use relay_wire::agent::AgentEvent;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use inject::{BLOCK_END, BLOCK_START};
pub use open::Opened;
pub use quota::Quota;
pub use request::{
    DoorCall, DoorLeg, ValidLeg, check_tools, project_from, project_of, valid_tool_name, validate,
    validate_door,
};

use crate::accounts::Caller;
use crate::clock::Clock;
use crate::config::{MemoryConfig, RoutingConfig};
use crate::domain::ProjectId;
use crate::error::{ApiError, ApiResult};
use crate::limits::CallerLimit;
use crate::metrics::registry::Metrics;
use crate::providers::registry::Models;
use crate::store::{AuthStore, MemoryStore};
use crate::usage::Ledger;
use crate::usage::period::QuotaMonth;

/// Request bodies of agent legs may be this large (long conversations).
pub const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// What a leg yields to its encoder: Relay's event, or (for a door whose client speaks the
/// answering provider's own API, `Opened::raw`) one of the provider's events as it sent it.
#[derive(Debug, Clone)]
pub enum LegEvent {
    Wire(AgentEvent),
    /// One server-sent event of a same-family provider, byte for byte (tool-call ids and names
    /// already made to follow Relay's rules).
    Raw(Bytes),
}

/// What running legs needs, each named: no handler state.
pub struct Deps {
    pub routing: RoutingConfig,
    pub memory_config: MemoryConfig,
    /// `[usage] drain_ms`: how long an abandoned stream is read on for its usage.
    pub drain: Duration,
    /// The monthly budgets of an account without its own; `None` in open mode.
    pub budget_defaults: Option<crate::usage::budget::Defaults>,
    pub models: Models,
    pub metrics: Arc<Metrics>,
    pub ledger: Ledger,
    /// Per-caller leg rate limit (`[limits] agent_*`).
    pub rate_limit: Arc<CallerLimit>,
    pub memory: Arc<dyn MemoryStore>,
    /// The accounts' store; `None` in open mode.
    pub auth: Option<Arc<dyn AuthStore>>,
    /// The clock calendar periods are counted by.
    pub clock: Arc<Clock>,
    /// `[auth] quota_period`, and the month the quota was last rolled to.
    pub quota_month: Arc<QuotaMonth>,
}

/// The leg service; cheap to clone.
#[derive(Clone)]
pub struct Legs(Arc<Inner>);

struct Inner {
    deps: Deps,
    /// Cancelled when the shutdown grace period is over: open legs end with an `error` event.
    stop: CancellationToken,
}

impl Legs {
    pub fn new(deps: Deps) -> Self {
        Self(Arc::new(Inner {
            deps,
            stop: CancellationToken::new(),
        }))
    }

    pub fn models(&self) -> &Models {
        &self.0.deps.models
    }
    pub fn ledger(&self) -> &Ledger {
        &self.0.deps.ledger
    }
    pub fn metrics(&self) -> &Metrics {
        &self.0.deps.metrics
    }
    /// The monthly budgets of an account without its own; `None` in open mode.
    pub fn budget_defaults(&self) -> Option<crate::usage::budget::Defaults> {
        self.0.deps.budget_defaults
    }
    fn deps(&self) -> &Deps {
        &self.0.deps
    }
    /// Resolves once open legs must end.
    pub fn stopping(&self) -> &CancellationToken {
        &self.0.stop
    }
    /// Tells every open leg to end now.
    pub fn stop(&self) {
        self.0.stop.cancel();
    }

    /// What a caller of a compatible door must pass before Relay reads its body: its rate
    /// limit, a budget not used up and (for an account) a unit of quota left. Cheap reads: the
    /// unit itself is taken at admission, after the body is parsed and validated.
    pub async fn gate(&self, caller: &Caller) -> ApiResult<()> {
        self.rate_limit(caller).await?;
        if let Caller::User(user) = caller {
            // A new month's roll-over makes the cached count stale: the account is read again.
            let fresh = match (self.roll_quota().await?, self.deps().auth.as_ref()) {
                (true, Some(auth)) => auth.user_by_email(&user.email).await?.map(|(u, _)| u),
                _ => None,
            };
            let user = fresh.as_ref().unwrap_or(user);
            if !user.unlimited() && user.remaining() <= 0 {
                self.metrics().quota_refusals.inc();
                return Err(quota::exceeded(self, user));
            }
            crate::usage::budget::check(
                self.ledger().store().as_ref(),
                self.deps().budget_defaults,
                Some(user.id.as_str()),
            )
            .await?;
        }
        Ok(())
    }

    /// Sets quota counts of an earlier month back to 0 when the clock has entered a new one
    /// (once per month per instance); true when it ran.
    pub async fn roll_quota(&self) -> crate::store::StoreResult<bool> {
        match self.deps().auth.as_ref() {
            Some(auth) => {
                let deps = self.deps();
                deps.quota_month.roll(auth.as_ref(), deps.clock.now()).await
            }
            None => Ok(false),
        }
    }

    /// Spends one cell of the caller's leg rate limit (429 with the wait when none is left).
    pub async fn rate_limit(&self, caller: &Caller) -> ApiResult<()> {
        self.deps().rate_limit.check(caller.user_id()).await
    }

    /// Everything before the first byte of a leg, for `/v1/agent/stream` and the compatible
    /// endpoints alike: the model chain, the output cap and budget reservation, quota admission
    /// beside the note lookup, then the chain until one model answers.
    pub async fn open(
        &self,
        caller: &Caller,
        request_id: String,
        model: Option<&str>,
        mut leg: ValidLeg,
        arrived: Instant,
    ) -> ApiResult<Opened> {
        leg.key_cache(caller.user_id());
        let chain = self.chain_for(caller, model)?;
        // The output a call may produce: the client's own cap, within the models' caps and
        // (below) what the account's budgets have left, which the leg reserves before it runs.
        leg.max_tokens = min_cap(
            leg.max_tokens,
            chain
                .iter()
                .filter_map(|m| m.policy.max_output_tokens)
                .min(),
        );
        let admitted = crate::usage::budget::reserve(
            self.ledger().store().as_ref(),
            self.deps().budget_defaults,
            match caller {
                Caller::User(user) => Some(user.id.as_str()),
                Caller::Local => None,
            },
            leg.prompt_estimate,
            leg.max_tokens,
            dearest(self.ledger(), &chain, leg.service_tier.as_deref()).as_ref(),
        )
        .await?;
        let budget = admitted.budget;
        let hold = admitted.hold;
        if let Some(hold) = &hold {
            leg.max_tokens = min_cap(leg.max_tokens, Some(hold.output_cap));
        }
        let reservation = hold.map(|h| h.reservation.id);
        // Admission (a write) and the note lookup (reads) go to the store side by side: a leg
        // waits for the slower of the two, not for both. A refused leg's notes are thrown away.
        let admission = quota::Quota::admit(self, caller);
        let admission = admission.instrument(tracing::info_span!("admission"));
        let lookup = inject::notes(self, caller.user_id(), &leg).instrument(tracing::info_span!(
            "note_lookup",
            relay.project_id = leg.project_id.as_ref().map_or("", ProjectId::as_str)
        ));
        let (quota, injected) = tokio::join!(admission, lookup);
        let quota = match quota {
            Ok(quota) => quota,
            Err(e) => {
                self.ledger().release(reservation);
                return Err(e);
            }
        };
        open::open(
            self.clone(),
            caller.user_id(),
            open::Admitted {
                request_id,
                reservation,
                budget,
            },
            chain,
            leg,
            injected,
            quota,
            arrived,
        )
        .await
    }
}

impl Legs {
    /// The models that may answer `model` (a name or `auto`) for `caller`: the configured
    /// chain less the models the caller's account may not use (issue 40). A named model the
    /// account may not use is refused (`model_not_allowed`); `auto` skips such models.
    pub fn chain_for(
        &self,
        caller: &Caller,
        model: Option<&str>,
    ) -> ApiResult<Vec<Arc<crate::providers::registry::ModelEntry>>> {
        let models = self.models();
        let mut chain = models.resolve(model).ok_or_else(|| {
            ApiError::new(
                ErrorCode::UnknownModel,
                format!(
                    "unknown model `{}`; use auto or one of: {}",
                    model.unwrap_or_default(),
                    models.names().join(", ")
                ),
            )
        })?;
        if let Caller::User(user) = caller
            && user.allowed_models.is_some()
        {
            let named = model.filter(|m| *m != "auto");
            if let Some(name) = named
                && !user.may_use(name)
            {
                return Err(ApiError::new(
                    ErrorCode::ModelNotAllowed,
                    format!(
                        "this account may not use the model `{name}`; ask an operator, or use one of: {}",
                        allowed(models, user)
                    ),
                ));
            }
            chain.retain(|m| user.may_use(&m.name));
            if chain.is_empty() {
                return Err(ApiError::new(
                    ErrorCode::ModelNotAllowed,
                    format!(
                        "no model this account may use is configured for `{}`; ask an operator, or use one of: {}",
                        model.unwrap_or("auto"),
                        allowed(models, user)
                    ),
                ));
            }
        }
        if chain.is_empty() {
            return Err(ApiError::new(
                ErrorCode::ProviderUnavailable,
                "no model is configured for auto",
            ));
        }
        Ok(chain)
    }
}

/// The configured models `user` may use, for a refusal's message.
fn allowed(models: &Models, user: &crate::store::User) -> String {
    let names: Vec<&str> = models
        .names()
        .into_iter()
        .filter(|n| user.may_use(n))
        .collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// The dearest prices among the models that may answer (each price the highest of any model),
/// which a spend reservation holds; `None` when none of them is priced.
fn dearest(
    ledger: &Ledger,
    chain: &[Arc<crate::providers::registry::ModelEntry>],
    tier: Option<&str>,
) -> Option<crate::usage::Prices> {
    chain
        .iter()
        .filter_map(|m| {
            ledger
                .price_of(&m.name)
                .map(|p| p.scaled(m.policy.tier_multiplier(tier)))
        })
        .reduce(|a, b| crate::usage::Prices {
            input: a.input.max(b.input),
            cached_input: a.cached_input.max(b.cached_input),
            cache_write: a.cache_write.max(b.cache_write),
            output: a.output.max(b.output),
        })
}

/// The smaller of two output caps, either of which may be absent.
fn min_cap(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
