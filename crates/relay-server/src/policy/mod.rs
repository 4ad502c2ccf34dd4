//! The pass-through policy (issue 38): the fields of a client's request that change who pays, who
//! is seen, or what provider-side state is touched belong to Relay; every other field still
//! reaches a same-family provider unchanged.
//!
//! `check` refuses what a call may not ask of the models it may reach (a 400 naming the field),
//! `rewrite` puts Relay's values in the fields it owns (`store`, the identifiers providers use for
//! abuse enforcement, the cache key's namespace), `clamp_output` bounds the output a call may
//! ask for, and `betas` filters `anthropic-beta`.

mod hosted;
mod identity;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::config::{FREE_TIERS, ModelConfig};
pub use crate::domain::Door;
use crate::error::ApiError;

pub use hosted::{hosted_tool_name, strip_unallowed_search};
pub use identity::Identity;

/// What one model allows a call beyond a plain one (`[[models]]` policy keys).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelPolicy {
    pub max_output_tokens: Option<u32>,
    pub service_tiers: Vec<String>,
    pub tier_price_multipliers: BTreeMap<String, f64>,
    pub hosted_tools: Vec<String>,
    pub logprobs: bool,
    pub audio: bool,
    pub anthropic_betas: Vec<String>,
}

impl ModelPolicy {
    pub fn of(model: &ModelConfig) -> Self {
        let feature = |f: &str| model.features.iter().any(|x| x == f);
        Self {
            max_output_tokens: model.max_output_tokens,
            service_tiers: model.service_tiers.clone(),
            tier_price_multipliers: model.tier_price_multipliers.clone(),
            hosted_tools: model.hosted_tools.clone(),
            logprobs: feature("logprobs"),
            audio: feature("audio"),
            anthropic_betas: model.anthropic_betas.clone(),
        }
    }

    /// The cost multiplier of a call on `tier` (1 when the tier has none).
    pub fn tier_multiplier(&self, tier: Option<&str>) -> f64 {
        tier.and_then(|t| self.tier_price_multipliers.get(t))
            .copied()
            .unwrap_or(1.0)
    }
}

/// The models a call may reach (one, or `auto`'s chain): a grant holds only where every one of
/// them grants it, since the call may end on any.
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a>(pub &'a [&'a ModelPolicy]);

impl Chain<'_> {
    fn all(&self, f: impl Fn(&ModelPolicy) -> bool) -> bool {
        self.0.iter().all(|p| f(p))
    }

    pub fn allows_tool(&self, name: &str) -> bool {
        self.all(|p| p.hosted_tools.iter().any(|t| t == name))
    }

    pub fn allows_tier(&self, tier: &str) -> bool {
        FREE_TIERS.contains(&tier) || self.all(|p| p.service_tiers.iter().any(|t| t == tier))
    }

    /// The smallest output cap of the chain, if any model has one.
    pub fn output_cap(&self) -> Option<u32> {
        self.0.iter().filter_map(|p| p.max_output_tokens).min()
    }
}

/// A 400 naming the field at fault.
fn refuse(field: &str, why: &str) -> ApiError {
    ApiError::invalid(format!("{field}: {why}"))
}

/// Refuses what the call may not ask of its models: multipliers, billed extras, provider-side
/// tools and references to provider-side state. Runs on the client's body before anything is
/// sent, whichever family the answering provider speaks.
pub fn check(door: Door, body: &Map<String, Value>, chain: Chain<'_>) -> Result<(), ApiError> {
    for field in ["n", "best_of"] {
        if body
            .get(field)
            .and_then(Value::as_u64)
            .is_some_and(|n| n > 1)
        {
            return Err(refuse(
                field,
                "Relay answers with one choice; ask for one (or leave it out) and send more calls for more",
            ));
        }
    }
    if let Some(tier) = body.get("service_tier").and_then(Value::as_str) {
        let free = door == Door::Messages && tier == "standard_only";
        if !free && !chain.allows_tier(tier) {
            return Err(refuse(
                "service_tier",
                &format!(
                    "`{tier}` is not allowed for this model (auto, default and flex are; an operator allows others with [[models]] service_tiers)"
                ),
            ));
        }
    }
    let wants_logprobs = body
        .get("logprobs")
        .is_some_and(|v| v.as_bool() == Some(true))
        || body
            .get("top_logprobs")
            .and_then(Value::as_u64)
            .is_some_and(|n| n > 0)
        || includes(body, "message.output_text.logprobs");
    if wants_logprobs && !chain.all(|p| p.logprobs) {
        let field = if body.contains_key("top_logprobs") {
            "top_logprobs"
        } else {
            "logprobs"
        };
        return Err(refuse(
            field,
            "log probabilities are not enabled for this model ([[models]] features)",
        ));
    }
    let wants_audio = body.get("audio").is_some_and(|v| !v.is_null())
        || body
            .get("modalities")
            .and_then(Value::as_array)
            .is_some_and(|m| m.iter().any(|x| x == "audio"));
    if wants_audio && !chain.all(|p| p.audio) {
        let field = if body.contains_key("modalities") {
            "modalities"
        } else {
            "audio"
        };
        return Err(refuse(
            field,
            "audio output is not enabled for this model ([[models]] features)",
        ));
    }
    hosted::check(door, body, chain)
}

fn includes(body: &Map<String, Value>, what: &str) -> bool {
    body.get("include")
        .and_then(Value::as_array)
        .is_some_and(|i| i.iter().any(|x| x == what))
}

/// The fields `rewrite` may set: a same-family provider is sent Relay's value of these, never
/// the client's bytes of them.
pub const REWRITTEN: [&str; 5] = [
    "store",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "metadata",
];

/// Puts Relay's values in the fields it owns on a body bound for a same-family provider: nothing
/// is stored at the provider, the abuse identifiers name the account (keyed), and the client's
/// own prompt cache key is kept apart from other accounts'.
pub fn rewrite(door: Door, body: &mut Map<String, Value>, identity: &Identity) {
    match door {
        Door::ChatCompletions | Door::Responses => {
            body.insert("store".into(), Value::Bool(false));
            for field in ["user", "safety_identifier"] {
                if body.contains_key(field) {
                    body.insert(field.into(), Value::String(identity.id().to_owned()));
                }
            }
            if let Some(Value::String(key)) = body.get_mut("prompt_cache_key") {
                *key = identity.namespaced(key);
            }
        }
        // The native route's body is Relay's own; no provider is sent it.
        Door::Agent => {}
        Door::Messages => {
            let metadata = body
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if !metadata.is_object() {
                *metadata = Value::Object(Map::new());
            }
            if let Some(m) = metadata.as_object_mut() {
                m.insert("user_id".into(), Value::String(identity.id().to_owned()));
            }
        }
    }
}

/// The largest output the call asks for, in whichever field its family names it.
pub fn requested_output(body: &Map<String, Value>) -> Option<u64> {
    ["max_tokens", "max_completion_tokens", "max_output_tokens"]
        .iter()
        .filter_map(|f| body.get(*f).and_then(Value::as_u64))
        .min()
}

/// Bounds the output a same-family body asks for by `cap`: each output field the client set is
/// lowered to it, one is set where the client set none (`absent_field`), and a thinking budget
/// stays below the output it belongs to (or thinking is left off when none would fit).
pub fn clamp_output(body: &mut Map<String, Value>, cap: u32, absent_field: &str) {
    let mut set = false;
    for field in ["max_tokens", "max_completion_tokens", "max_output_tokens"] {
        if let Some(v) = body.get_mut(field) {
            set = true;
            if v.as_u64().is_none_or(|n| n > u64::from(cap)) {
                *v = Value::from(cap);
            }
        }
    }
    if !set {
        body.insert(absent_field.into(), Value::from(cap));
    }
    // Anthropic: budget_tokens must be at least 1024 and below max_tokens.
    let budget = body
        .get("thinking")
        .and_then(|t| t.get("budget_tokens"))
        .and_then(Value::as_u64);
    if let Some(budget) = budget
        && budget >= u64::from(cap)
    {
        if cap > 1024 {
            body["thinking"]["budget_tokens"] = Value::from(cap - 1);
        } else {
            body.remove("thinking");
        }
    }
}

/// The Anthropic betas that always pass: the ones Claude Code and the SDKs send for features
/// Relay supports (Claude Code 2.1.332 sends the first five on every call).
pub const DEFAULT_BETAS: [&str; 9] = [
    "claude-code-20250219",
    "interleaved-thinking-2025-05-14",
    "context-management-2025-06-27",
    "thinking-token-count-2026-05-13",
    "advanced-tool-use-2025-11-20",
    "fine-grained-tool-streaming-2025-05-14",
    "prompt-caching-2024-07-31",
    "token-efficient-tools-2025-02-19",
    "extended-cache-ttl-2025-04-11",
];

/// `anthropic-beta` as sent upstream: the values on the list (the defaults, `extra` from
/// `[routing] anthropic_betas`, and those every model of the chain allows), and the ones dropped.
pub fn betas(header: &str, extra: &[String], chain: Chain<'_>) -> (Option<String>, Vec<String>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for value in header.split(',').map(str::trim).filter(|v| !v.is_empty()) {
        let listed = DEFAULT_BETAS.contains(&value)
            || extra.iter().any(|e| e == value)
            || (!chain.0.is_empty() && chain.all(|p| p.anthropic_betas.iter().any(|b| b == value)));
        if listed {
            kept.push(value);
        } else {
            dropped.push(value.chars().take(100).collect());
        }
    }
    ((!kept.is_empty()).then(|| kept.join(",")), dropped)
}

#[cfg(test)]
mod tests;
