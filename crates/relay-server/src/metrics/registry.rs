//! Every metric Relay exports, declared and registered in one registry per app. Free of the HTTP
//! side (the request-counting middleware and `/metrics` live in the parent), so the state can
//! hold the registry without depending on the handlers that read it.

use std::sync::Arc;

use axum::http::StatusCode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::process;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub method: String,
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LegLabels {
    pub model: String,
    /// `tool_calls`, `done`, `error`, `failed` (no model answered), `cancelled` (the client left).
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenKindLabels {
    pub model: String,
    /// `input` (every prompt token), `cached_input` and `cache_write` (parts of it), `output`.
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignalLabels {
    /// `metrics`, `logs` or `traces`.
    pub signal: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub model: String,
    /// `in` or `out`.
    pub direction: String,
}

fn overhead_histogram() -> Histogram {
    // 50 µs .. ~0.8 s: what Relay itself adds should sit in the first buckets.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.00005, 2.0, 15,
    ))
}

fn latency_histogram() -> Histogram {
    // 0.5 ms .. ~16 s: the relay's own overhead sits at the bottom, streams at the top.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0005, 2.0, 16,
    ))
}

pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<HttpLabels, Counter>,
    pub http_duration: Family<RouteLabels, Histogram, fn() -> Histogram>,
    pub agent_legs: Family<LegLabels, Counter>,
    pub upstream_first_output: Family<ModelLabels, Histogram, fn() -> Histogram>,
    pub agent_tokens: Family<TokenLabels, Counter>,
    pub tokens: Family<TokenKindLabels, Counter>,
    pub active_streams: Gauge,
    pub quota_refusals: Counter,
    pub notes_injected: Counter,
    pub relay_overhead: Histogram,
    pub limits_store_errors: Counter,
    /// Cost of legs in USD by model, from `[[models]]` prices.
    pub cost_usd: Family<ModelLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// OTLP exports signed-in agents posted, by signal.
    pub agent_telemetry: Family<SignalLabels, Counter>,
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        // The root holds the unprefixed `process_*` family; Relay's own live under `relay_`.
        let mut root = Registry::default();
        root.register_collector(Box::new(process::ProcessCollector));
        let registry = root.sub_registry_with_prefix("relay");
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        registry.register(
            "build_info",
            "The running build, by version; always 1",
            build_info,
        );
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by method, matched route and status",
            http_requests.clone(),
        );
        let http_duration =
            Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            );
        registry.register(
            "http_request_duration_seconds",
            "Time to response headers, by method and matched route",
            http_duration.clone(),
        );
        let agent_legs = Family::<LegLabels, Counter>::default();
        registry.register(
            "agent_legs",
            "Agent legs by concrete model and outcome",
            agent_legs.clone(),
        );
        let upstream_first_output =
            Family::<ModelLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            );
        registry.register(
            "agent_upstream_first_output_seconds",
            "Time from sending a leg upstream to the provider's first output",
            upstream_first_output.clone(),
        );
        let agent_tokens = Family::<TokenLabels, Counter>::default();
        registry.register(
            "agent_tokens",
            "Tokens by model and direction, as the provider counted them",
            agent_tokens.clone(),
        );
        let tokens = Family::<TokenKindLabels, Counter>::default();
        registry.register(
            "tokens",
            "Tokens by model and kind as the provider counted them: input (every prompt token), cached_input and cache_write (the parts of input read from and written to the prompt cache), output",
            tokens.clone(),
        );
        let active_streams = Gauge::default();
        registry.register(
            "agent_active_streams",
            "Agent streams open right now",
            active_streams.clone(),
        );
        let quota_refusals = Counter::default();
        registry.register(
            "quota_refusals",
            "Agent legs refused for quota",
            quota_refusals.clone(),
        );
        let notes_injected = Counter::default();
        registry.register(
            "notes_injected",
            "Notes injected into agent legs",
            notes_injected.clone(),
        );
        let relay_overhead = overhead_histogram();
        registry.register(
            "agent_relay_overhead_seconds",
            "Time Relay spends on a leg before calling the provider (auth, validation, quota, notes)",
            relay_overhead.clone(),
        );
        let limits_store_errors = Counter::default();
        registry.register(
            "limits_store_errors",
            "Limit decisions Redis did not answer in time, decided by this instance's own counters",
            limits_store_errors.clone(),
        );
        let cost_usd = Family::<ModelLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "cost_usd",
            "Cost of legs in USD by configured model, from the [[models]] prices",
            cost_usd.clone(),
        );
        let agent_telemetry = Family::<SignalLabels, Counter>::default();
        registry.register(
            "agent_telemetry",
            "OTLP exports (metrics, logs, traces) that signed-in agents posted to Relay",
            agent_telemetry.clone(),
        );
        Arc::new(Self {
            registry: root,
            http_requests,
            http_duration,
            agent_legs,
            upstream_first_output,
            agent_tokens,
            tokens,
            active_streams,
            quota_refusals,
            notes_injected,
            relay_overhead,
            limits_store_errors,
            cost_usd,
            agent_telemetry,
        })
    }

    /// The OpenMetrics exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "cannot encode metrics");
        }
        out
    }

    pub fn observe_request(&self, method: &str, route: &str, status: StatusCode, seconds: f64) {
        self.http_requests
            .get_or_create(&HttpLabels {
                method: method.to_owned(),
                route: route.to_owned(),
                status: status.as_u16(),
            })
            .inc();
        self.http_duration
            .get_or_create(&RouteLabels {
                method: method.to_owned(),
                route: route.to_owned(),
            })
            .observe(seconds);
    }
}

impl Metrics {
    pub fn leg(&self, model: &str, outcome: &str) {
        self.agent_legs
            .get_or_create(&LegLabels {
                model: model.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    pub fn tokens(&self, model: &str, usage: &crate::providers::Usage) {
        for (kind, n) in [
            ("input", Some(usage.input_tokens)),
            ("cached_input", usage.cached_input_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("output", Some(usage.output_tokens)),
        ] {
            if let Some(n) = n {
                self.tokens
                    .get_or_create(&TokenKindLabels {
                        model: model.to_owned(),
                        kind: kind.to_owned(),
                    })
                    .inc_by(n);
            }
        }
        let (input, output) = (usage.input_tokens, usage.output_tokens);
        for (direction, n) in [("in", input), ("out", output)] {
            self.agent_tokens
                .get_or_create(&TokenLabels {
                    model: model.to_owned(),
                    direction: direction.to_owned(),
                })
                .inc_by(n);
        }
    }
}
