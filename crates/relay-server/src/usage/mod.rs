//! The usage ledger: one record per leg that took a quota unit, priced from `[[models]]`, written
//! in batches off the leg's path (`ledger`), and the monthly token budgets (`budget`); the
//! endpoints that read it back are `http::usage`.

pub mod budget;
pub mod caps;
pub mod ledger;
pub mod period;

use std::collections::HashMap;
use std::time::Instant;

use crate::config::ModelConfig;
use crate::domain::Door;
use crate::providers::Usage;
use crate::store::usage::LegRecord;

pub use ledger::Ledger;

/// A model's prices in USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Prices {
    pub input: f64,
    pub cached_input: f64,
    pub cache_write: f64,
    pub output: f64,
}

impl Prices {
    /// `None` when the model names no price at all; an unnamed price of a priced model is 0.
    pub fn of(model: &ModelConfig) -> Option<Self> {
        if model.prices().iter().all(|(_, p)| p.is_none()) {
            return None;
        }
        Some(Self {
            input: model.input_price.unwrap_or(0.0),
            cached_input: model.cached_input_price.unwrap_or(0.0),
            cache_write: model.cache_write_price.unwrap_or(0.0),
            output: model.output_price.unwrap_or(0.0),
        })
    }

    /// Every price times `factor` (a service tier's multiplier).
    pub fn scaled(&self, factor: f64) -> Self {
        Self {
            input: self.input * factor,
            cached_input: self.cached_input * factor,
            cache_write: self.cache_write * factor,
            output: self.output * factor,
        }
    }

    /// (input − cached − cache write) × input + cached × cached + cache write × cache write +
    /// output × output, per million tokens.
    pub fn cost(&self, input: i64, cached: i64, cache_write: i64, output: i64) -> f64 {
        let uncached = (input - cached - cache_write).max(0);
        #[allow(
            clippy::cast_precision_loss,
            reason = "token counts are far below 2^52"
        )]
        let total = uncached as f64 * self.input
            + cached as f64 * self.cached_input
            + cache_write as f64 * self.cache_write
            + output as f64 * self.output;
        total / 1_000_000.0
    }
}

/// The prices of every configured model, by name.
#[derive(Debug, Clone, Default)]
pub struct PriceList(HashMap<String, Prices>);

impl PriceList {
    pub fn from_models(models: &[ModelConfig]) -> Self {
        Self(
            models
                .iter()
                .filter_map(|m| Some((m.name.clone(), Prices::of(m)?)))
                .collect(),
        )
    }

    pub fn get(&self, model: &str) -> Option<&Prices> {
        self.0.get(model)
    }
}

/// What a leg knows of itself for its record, from admission to its end.
#[derive(Debug, Clone)]
pub struct LegFacts {
    pub user_id: String,
    pub request_id: String,
    pub route: Door,
    pub project_id: Option<String>,
    pub arrived: Instant,
    pub ttfb_ms: i64,
    /// The budget reservation the leg holds (`budget::reserve`), settled by its record.
    pub reservation: Option<String>,
    /// The service tier the client asked for, which may price the call differently.
    pub service_tier: Option<String>,
    /// The prompt's estimated size in tokens, recorded when the provider's own count never came.
    pub prompt_estimate: u64,
}

impl LegFacts {
    /// The record of a leg that ended with `status` on `model`, having reported `usage` (none
    /// when it failed or was cancelled before the provider's usage arrived).
    pub fn record(
        &self,
        model: &str,
        provider: &str,
        status: &'static str,
        usage: Option<&Usage>,
        prices: Option<&Prices>,
    ) -> LegRecord {
        // Clamped before the cost is priced from them, so that a provider's absurd figure
        // neither breaks the ledger's sums nor prices the leg at it.
        let n = |v: Option<u64>| v.map_or(0, crate::store::usage::clamp_tokens);
        if usage.is_some_and(|u| {
            [
                Some(u.input_tokens),
                Some(u.output_tokens),
                u.cached_input_tokens,
                u.cache_write_tokens,
                u.reasoning_tokens,
            ]
            .into_iter()
            .flatten()
            .any(|v| !i64::try_from(v).is_ok_and(|v| v <= crate::store::usage::MAX_TOKENS))
        }) {
            tracing::warn!(
                request_id = %self.request_id,
                model,
                provider,
                "the provider reported a token figure past the ledger's maximum; clamped"
            );
        }
        let input = n(usage.map(|u| u.input_tokens));
        let cached = n(usage.and_then(|u| u.cached_input_tokens));
        let cache_write = n(usage.and_then(|u| u.cache_write_tokens));
        let output = n(usage.map(|u| u.output_tokens));
        LegRecord {
            user_id: self.user_id.clone(),
            request_id: self.request_id.clone(),
            #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
            at: crate::clock::now() as i64,
            route: self.route,
            model: model.to_owned(),
            provider: provider.to_owned(),
            project_id: self.project_id.clone(),
            status,
            input_tokens: input,
            cached_input_tokens: cached,
            cache_write_tokens: cache_write,
            output_tokens: output,
            reasoning_tokens: n(usage.and_then(|u| u.reasoning_tokens)),
            server_tool_uses: n(usage.and_then(|u| u.server_tool_uses)),
            ttfb_ms: self.ttfb_ms,
            duration_ms: i64::try_from(self.arrived.elapsed().as_millis()).unwrap_or(i64::MAX),
            cost_usd: prices.map(|p| p.cost(input, cached, cache_write, output)),
            reservation: self.reservation.clone(),
            estimated: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_door_reads_back_from_the_store_as_itself() {
        for door in Door::ALL {
            assert_eq!(crate::store::usage::route_of(door.as_str()), door);
        }
        assert_eq!(crate::store::usage::route_of("hand-edited"), Door::Agent);
    }

    #[test]
    fn cost_prices_uncached_cached_cache_writes_and_output_apart() {
        let p = Prices {
            input: 3.0,
            cached_input: 0.3,
            cache_write: 3.75,
            output: 15.0,
        };
        // 1000 input of which 600 cached and 100 written: 300 uncached.
        let cost = p.cost(1000, 600, 100, 200);
        let expected = (300.0 * 3.0 + 600.0 * 0.3 + 100.0 * 3.75 + 200.0 * 15.0) / 1e6;
        assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
        let unpriced = ModelConfig::default();
        assert_eq!(Prices::of(&unpriced), None);
        let half = ModelConfig {
            output_price: Some(2.0),
            ..ModelConfig::default()
        };
        assert_eq!(Prices::of(&half).map(|p| p.input), Some(0.0));
    }
}
