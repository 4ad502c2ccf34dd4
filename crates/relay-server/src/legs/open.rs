//! Opening a leg: try the chain until a provider produces its first output (before any header
//! is sent), with backoff on the same model and fallback to the next; `stream.rs` then streams
//! the rest.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use futures::StreamExt;
use relay_wire::ErrorCode;
use relay_wire::agent::AgentEvent;
use tracing::Instrument;

use super::inject;
use super::quota::Quota;
use super::request::ValidLeg;
use super::stream::{Opening, events_of};
use super::{LegEvent, Legs};
use crate::error::{ApiError, ApiResult};
use crate::providers::registry::ModelEntry;
use crate::providers::{EventStream, ProviderError, ProviderEvent};
use crate::store::Note;
use crate::usage::LegFacts;

/// The longest wait between two tries of one model; a longer `Retry-After` moves on to the next model.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// A leg whose first provider output arrived: the model that answers, the injected notes' ids,
/// and the leg's events, `start` first and one terminal event last (pings in between).
pub struct Opened {
    pub model: String,
    pub note_ids: Vec<String>,
    pub events: futures::stream::BoxStream<'static, LegEvent>,
    /// The leg's quota unit: a door that ends up giving the client nothing but an error (a
    /// non-streamed answer that failed after the first output) gives it back.
    pub quota: Quota,
    /// Set by a door that answers whole: a leg of it that fails is refunded, so it leaves no
    /// usage record (issue 35: refunded calls leave none).
    pub refunded_if_failed: Arc<AtomicBool>,
    /// The answering provider speaks the client's API and streams its own events
    /// (`LegEvent::Raw`) ahead of Relay's: a door sends those and only Relay's pings and
    /// errors in its own form.
    pub raw: bool,
    /// The account's budgets as admission read them (before this leg), for the usage-limit
    /// headers.
    pub budget: crate::usage::budget::Budget,
}

/// What admission gave the leg besides its quota unit.
pub struct Admitted {
    /// The client's request id, sanitised.
    pub request_id: String,
    /// The budget reservation the leg holds, if its account has a budget.
    pub reservation: Option<String>,
    /// The account's budgets as admission read them, before this leg.
    pub budget: crate::usage::budget::Budget,
}

/// Tries the chain until a model produces its first output; the caller encodes the events
/// (NDJSON for a leg, the compatible endpoints' own formats for theirs).
#[allow(clippy::too_many_arguments, reason = "the leg's parts, each used once")]
pub async fn open(
    legs: Legs,
    user_id: &str,
    admitted: Admitted,
    chain: Vec<Arc<ModelEntry>>,
    leg: ValidLeg,
    notes: Vec<Note>,
    quota: Quota,
    arrived: Instant,
) -> ApiResult<Opened> {
    let routing = &legs.deps().routing;
    let idle = Duration::from_millis(routing.idle_timeout_ms);
    let retries = routing.retries;
    let block = inject::block(&notes);
    let history_ids = history_call_ids(&leg);
    let refunded_if_failed = Arc::new(AtomicBool::new(false));
    let Admitted {
        request_id,
        reservation,
        budget,
    } = admitted;
    let mut facts = LegFacts {
        user_id: user_id.to_owned(),
        request_id: request_id.clone(),
        route: leg.door(),
        project_id: leg.project_id.as_ref().map(|p| p.as_str().to_owned()),
        arrived,
        ttfb_ms: 0,
        reservation,
        service_tier: leg.service_tier.clone(),
        prompt_estimate: leg.prompt_estimate,
    };
    legs.metrics()
        .relay_overhead
        .observe(arrived.elapsed().as_secs_f64());

    let mut last_error: Option<ProviderError> = None;
    let mut reached_any = false;
    'chain: for model in &chain {
        for attempt in 0..=retries {
            let sent = Instant::now();
            let span = attempt_span(model, attempt);
            let request = leg.to_chat(&model.upstream, model.provider.kind(), block.clone());
            let tried = first_output(model, request, idle)
                .instrument(span.clone())
                .await;
            let outcome = match &tried {
                Ok(_) => "output",
                Err(e) => e.kind(),
            };
            span.record("relay.outcome", outcome);
            span.record(
                "relay.time_to_first_output_ms",
                sent.elapsed().as_secs_f64() * 1000.0,
            );
            if tried.is_err() {
                span.record("otel.status_code", "ERROR");
                span.record("error.type", outcome);
            }
            drop(span);
            match tried {
                Ok(FirstOutput {
                    events,
                    first,
                    counted,
                    raw,
                }) => {
                    legs.metrics()
                        .upstream_first_output
                        .get_or_create(&crate::metrics::ModelLabels {
                            model: model.name.clone(),
                        })
                        .observe(sent.elapsed().as_secs_f64());
                    legs.metrics().notes_injected.inc_by(notes.len() as u64);
                    quota.served().await;
                    facts.ttfb_ms =
                        i64::try_from(arrived.elapsed().as_millis()).unwrap_or(i64::MAX);
                    let note_ids: Vec<String> =
                        notes.iter().map(|n| n.id.as_str().to_owned()).collect();
                    let start = AgentEvent::Start {
                        request_id,
                        model: model.name.clone(),
                        project_id: leg.project_id.as_ref().map(|p| p.as_str().to_owned()),
                        notes: u32::try_from(notes.len()).unwrap_or(u32::MAX),
                        note_ids: note_ids.clone(),
                    };
                    return Ok(Opened {
                        model: model.name.clone(),
                        note_ids,
                        quota,
                        refunded_if_failed: refunded_if_failed.clone(),
                        raw: !raw.is_empty(),
                        budget,
                        events: events_of(
                            legs.clone(),
                            model.clone(),
                            facts,
                            Opening {
                                start,
                                first,
                                counted,
                                raw,
                                events,
                            },
                            idle,
                            history_ids,
                            refunded_if_failed,
                        ),
                    });
                }
                Err(e) => {
                    tracing::warn!(model = %model.name, attempt, error = %e, "provider failed before any output");
                    reached_any |=
                        !matches!(e, ProviderError::Connect(_) | ProviderError::IdleTimeout);
                    let retryable = e.retryable_before_output();
                    let wait = backoff(&e, attempt);
                    last_error = Some(e);
                    if !retryable {
                        break 'chain;
                    }
                    match wait {
                        Some(d) if attempt < retries => tokio::time::sleep(d).await,
                        _ => continue 'chain,
                    }
                }
            }
        }
    }
    quota.refund().await;
    legs.ledger().release(facts.reservation.take());
    let model = chain.first().map_or("none", |m| m.name.as_str());
    legs.metrics().leg(model, "failed");
    Err(match last_error {
        Some(e @ ProviderError::RateLimited { retry_after, .. }) => ApiError::new(
            ErrorCode::RateLimited,
            crate::providers::sanitise::rate_limited_before_output(&e),
        )
        .with_retry_after(retry_after.map_or(1, |d| d.as_secs().max(1))),
        Some(e @ ProviderError::EventTooLarge { .. }) => ApiError::new(
            ErrorCode::UpstreamEventTooLarge,
            format!("{e}; the quota unit was given back"),
        ),
        Some(e) if reached_any => ApiError::new(
            ErrorCode::UpstreamError,
            crate::providers::sanitise::before_output(&e),
        ),
        _ => ApiError::new(
            ErrorCode::ProviderUnavailable,
            "no model provider could be reached; the quota unit was given back",
        ),
    })
}

/// One try of one model, with the GenAI semantic-convention attributes a trace reader filters on.
fn attempt_span(model: &ModelEntry, attempt: u32) -> tracing::Span {
    tracing::info_span!(
        "provider_attempt",
        otel.name = format!("chat {}", model.upstream),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.system = model.provider.kind(),
        gen_ai.provider.name = model.provider.kind(),
        gen_ai.request.model = model.upstream.as_str(),
        relay.model = model.name.as_str(),
        relay.provider = model.provider_name.as_str(),
        relay.attempt = attempt,
        relay.outcome = tracing::field::Empty,
        relay.time_to_first_output_ms = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// What a model sent up to its first piece of output.
struct FirstOutput {
    events: EventStream,
    first: ProviderEvent,
    /// The provider's early count, if it sent one.
    counted: Option<crate::providers::Usage>,
    /// Its own events so far, when it streams them for a client of its family.
    raw: Vec<bytes::Bytes>,
}

/// Sends the request and waits for the first event, each within the idle timeout.
async fn first_output(
    model: &ModelEntry,
    request: crate::providers::ChatRequest,
    idle: Duration,
) -> Result<FirstOutput, ProviderError> {
    let mut events = tokio::time::timeout(idle, model.provider.stream(request))
        .await
        .map_err(|_| ProviderError::IdleTimeout)??;
    // An early count is not output: the model is decided (and a failure still falls back) by
    // the first piece of the answer; the count goes with it. The provider's own events before
    // it wait with it, so that nothing reaches the client of a model that fails here.
    let mut counted = None;
    let mut raw = Vec::new();
    loop {
        match tokio::time::timeout(idle, events.next()).await {
            Err(_) => return Err(ProviderError::IdleTimeout),
            Ok(None) => {
                return Err(ProviderError::Protocol(
                    "the stream ended before any output".into(),
                ));
            }
            Ok(Some(Err(e))) => return Err(e),
            Ok(Some(Ok(ProviderEvent::UsageSoFar(usage)))) => counted = Some(usage),
            Ok(Some(Ok(ProviderEvent::Raw(bytes)))) => raw.push(bytes),
            Ok(Some(Ok(first))) => {
                return Ok(FirstOutput {
                    events,
                    first,
                    counted,
                    raw,
                });
            }
        }
    }
}

/// How long to wait before trying the same model again; `None` moves on to the next model.
fn backoff(e: &ProviderError, attempt: u32) -> Option<Duration> {
    match e {
        ProviderError::RateLimited {
            retry_after: Some(d),
            ..
        } => (*d <= MAX_BACKOFF).then_some(*d),
        _ => Some((Duration::from_millis(100) * 2u32.saturating_pow(attempt)).min(MAX_BACKOFF)),
    }
}

/// The call ids of the leg's history: a call this leg emits must not repeat one.
fn history_call_ids(leg: &ValidLeg) -> HashSet<String> {
    leg.messages
        .iter()
        .filter_map(|m| match m {
            crate::providers::ChatMessage::Assistant { tool_calls, .. } => Some(tool_calls),
            _ => None,
        })
        .flatten()
        .map(|c| c.id.clone())
        .collect()
}
