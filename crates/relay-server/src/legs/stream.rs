//! Running an opened leg (see `open.rs`): stream its events as they come, with keep-alive pings,
//! an idle timeout, and cancellation when the client goes away (dropping the body drops the
//! upstream request). Encoding them is the caller's (`http::agent` as NDJSON, the doors in
//! their APIs' forms).

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use relay_wire::ErrorCode;
use relay_wire::agent::{
    AgentEvent, FinishReason as WireFinish, ToolCall as WireCall, Usage as WireUsage,
};

use super::calls;
use super::raw::AnswerIds;
use super::{LegEvent, Legs};
use crate::providers::registry::ModelEntry;
use crate::providers::{EventStream, FinishReason, ProviderError, ProviderEvent, Usage};
use crate::usage::LegFacts;

/// What a leg opens with: the `start` line, the first provider event, and the rest to come.
pub(super) struct Opening {
    pub(super) start: AgentEvent,
    pub(super) first: ProviderEvent,
    /// The provider's count before the first output, if it sent one.
    pub(super) counted: Option<Usage>,
    /// The provider's own events up to the first output, for a client of its family.
    pub(super) raw: Vec<Bytes>,
    pub(super) events: EventStream,
}

/// The opened leg's events, `start` first and one terminal event last.
pub(super) fn events_of(
    legs: Legs,
    model: Arc<ModelEntry>,
    facts: LegFacts,
    opening: Opening,
    idle: Duration,
    history_ids: HashSet<String>,
    refunded_if_failed: Arc<AtomicBool>,
) -> futures::stream::BoxStream<'static, LegEvent> {
    let Opening {
        start,
        first,
        counted,
        raw,
        events,
    } = opening;
    legs.metrics().active_streams.inc();
    let ping = Duration::from_millis(legs.deps().routing.ping_interval_ms);
    let now = Instant::now();
    let mut queued = VecDeque::with_capacity(2 + raw.len());
    queued.push_back(Queued::Line(start));
    queued.extend(raw.into_iter().map(Queued::Raw));
    queued.push_back(Queued::Provider(first));
    // Open until the leg ends (the terminal line, or the client leaving); its parent is the request.
    let span = tracing::info_span!(
        "stream",
        gen_ai.operation.name = "chat",
        gen_ai.system = model.provider.kind(),
        gen_ai.request.model = model.upstream.as_str(),
        relay.model = model.name.as_str(),
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        relay.outcome = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let leg = Leg {
        span,
        legs,
        model,
        events,
        queued,
        finished: false,
        last_line: now,
        last_upstream: now,
        idle,
        ping,
        history_ids,
        answer_ids: AnswerIds::default(),
        refunded_if_failed,
        facts,
        status: None,
        usage: None,
        counted,
        streamed_bytes: 0,
    };
    Box::pin(futures::stream::unfold(leg, |mut leg| async move {
        let event = leg.next_event().await?;
        Some((event, leg))
    }))
}

enum Queued {
    Line(AgentEvent),
    Raw(Bytes),
    Provider(ProviderEvent),
}

/// The state of one streaming leg; dropping it (the client left) drops the upstream request.
struct Leg {
    span: tracing::Span,
    legs: Legs,
    model: Arc<ModelEntry>,
    events: EventStream,
    queued: VecDeque<Queued>,
    finished: bool,
    last_line: Instant,
    last_upstream: Instant,
    idle: Duration,
    ping: Duration,
    /// The call ids of the leg's history (see `calls::normalise`).
    history_ids: HashSet<String>,
    /// The call ids a same-family provider's own events introduced, as sent (see `raw`).
    answer_ids: AnswerIds,
    /// See `Opened::refunded_if_failed`.
    refunded_if_failed: Arc<AtomicBool>,
    /// The usage record's parts: what the leg knew from the start, how it ended, what it used.
    facts: LegFacts,
    status: Option<&'static str>,
    usage: Option<Usage>,
    /// The provider's count before its finish (the prompt's tokens, from Anthropic's
    /// `message_start`): recorded if the finish never comes.
    counted: Option<Usage>,
    /// The answer's bytes streamed so far, for the estimate of a leg that ends early.
    streamed_bytes: usize,
}

impl Drop for Leg {
    fn drop(&mut self) {
        // The one place every leg that kept its quota unit ends: done, failed or cancelled. Queued
        // before the active count drops, so a leg no longer counted has its record queued.
        let status = self.status.unwrap_or("cancelled");
        let refunded = status == "error" && self.refunded_if_failed.load(Ordering::Relaxed);
        let ending = Ending {
            status,
            refunded,
            usage: self.usage,
            counted: self.counted,
            streamed_bytes: self.streamed_bytes,
        };
        let drain = self.legs.deps().drain;
        if !self.finished && ending.usage.is_none() && !drain.is_zero() {
            // The client left before the provider's final count: read on for it a bounded
            // time, off the client's path (the provider's tokens are billed either way).
            let events = std::mem::replace(&mut self.events, Box::pin(futures::stream::empty()));
            let (legs, model, facts) = (self.legs.clone(), self.model.clone(), self.facts.clone());
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let ending = ending.drained(events, drain).await;
                    ending.record(&legs, &model, &facts);
                });
            } else {
                ending.record(&self.legs, &self.model, &self.facts);
            }
        } else {
            ending.record(&self.legs, &self.model, &self.facts);
        }
        let metrics = self.legs.metrics();
        metrics.active_streams.dec();
        if !self.finished {
            metrics.leg(&self.model.name, "cancelled");
            self.span.record("relay.outcome", "cancelled");
        }
    }
}

/// How a leg ended, for its record: the provider's final usage when it came, else its early
/// count, else Relay's estimate (marked as one).
struct Ending {
    status: &'static str,
    /// A whole answer that failed gives its unit back; tokens the provider reported still count.
    refunded: bool,
    usage: Option<Usage>,
    counted: Option<Usage>,
    streamed_bytes: usize,
}

impl Ending {
    /// Reads the rest of an abandoned stream for at most `drain`, keeping the last count seen.
    async fn drained(mut self, mut events: EventStream, drain: Duration) -> Self {
        let deadline = tokio::time::Instant::now() + drain;
        while let Ok(Some(Ok(event))) = tokio::time::timeout_at(deadline, events.next()).await {
            match event {
                ProviderEvent::Finished { usage, .. } => {
                    self.usage = Some(usage);
                    break;
                }
                ProviderEvent::UsageSoFar(usage) => self.counted = Some(usage),
                _ => {}
            }
        }
        self
    }

    fn record(self, legs: &Legs, model: &ModelEntry, facts: &LegFacts) {
        let ledger = legs.ledger();
        if let Some(usage) = self.usage {
            ledger.leg_ended(facts, model, self.status, Some(&usage), false);
            return;
        }
        // Output streamed so far, at about four bytes a token.
        let streamed = (self.streamed_bytes as u64).div_ceil(4);
        let estimate = match self.counted {
            Some(counted) => Usage {
                output_tokens: counted.output_tokens.max(streamed),
                ..counted
            },
            None if self.refunded => {
                // Nothing the provider reported: the refunded call leaves no record.
                ledger.release(facts.reservation.clone());
                return;
            }
            None => Usage {
                input_tokens: facts.prompt_estimate,
                output_tokens: streamed,
                ..Usage::default()
            },
        };
        ledger.leg_ended(facts, model, self.status, Some(&estimate), true);
    }
}

impl Leg {
    /// The next event, or `None` after the terminal one.
    async fn next_event(&mut self) -> Option<LegEvent> {
        if self.finished {
            return None;
        }
        loop {
            let event = match self.queued.pop_front() {
                Some(Queued::Line(e)) => LegEvent::Wire(e),
                Some(Queued::Raw(bytes)) => LegEvent::Raw(self.raw(bytes)),
                Some(Queued::Provider(p)) => match self.translate(p) {
                    Some(e) => e,
                    None => continue,
                },
                None => match self.wait_upstream().await {
                    Some(e) => e,
                    None => continue,
                },
            };
            self.last_line = Instant::now();
            return Some(event);
        }
    }

    /// One of the provider's own events for a client of its family: sent as it came unless a
    /// tool call in it breaks Relay's rules (`raw`).
    fn raw(&mut self, bytes: Bytes) -> Bytes {
        self.answer_ids.frame(bytes, &self.history_ids)
    }

    /// Waits for the provider, sending a ping after a quiet spell and failing past the idle timeout.
    async fn wait_upstream(&mut self) -> Option<LegEvent> {
        let idle_at = self.last_upstream + self.idle;
        let ping_at = self.last_line + self.ping;
        let deadline = idle_at.min(ping_at);
        let stop = self.legs.stopping().clone();
        let next = tokio::select! {
            biased;
            () = stop.cancelled() => return Some(LegEvent::Wire(self.shut_down())),
            next = tokio::time::timeout_at(deadline.into(), self.events.next()) => next,
        };
        let wire = match next {
            Ok(Some(Ok(event))) => {
                self.last_upstream = Instant::now();
                return self.translate(event);
            }
            Ok(Some(Err(e))) => self.fail(&e),
            Ok(None) => self.fail(&ProviderError::Protocol(
                "the stream ended without a finish".into(),
            )),
            Err(_) if Instant::now() >= idle_at => self.fail(&ProviderError::IdleTimeout),
            Err(_) => AgentEvent::Ping,
        };
        Some(LegEvent::Wire(wire))
    }

    /// The event for a provider event; `None` for nothing to send (an empty piece).
    fn translate(&mut self, event: ProviderEvent) -> Option<LegEvent> {
        if let ProviderEvent::Raw(bytes) = event {
            return Some(LegEvent::Raw(self.raw(bytes)));
        }
        self.wire(event).map(LegEvent::Wire)
    }

    /// Relay's event for a provider event.
    fn wire(&mut self, event: ProviderEvent) -> Option<AgentEvent> {
        match event {
            ProviderEvent::Raw(_) => None,
            ProviderEvent::UsageSoFar(usage) => {
                self.counted = Some(usage);
                None
            }
            ProviderEvent::Text(text) => {
                self.streamed_bytes += text.len();
                (!text.is_empty()).then_some(AgentEvent::Text { text })
            }
            ProviderEvent::Reasoning(text) => {
                self.streamed_bytes += text.len();
                (!text.is_empty()).then_some(AgentEvent::Reasoning {
                    text,
                    signature: None,
                    redacted: None,
                    item: None,
                })
            }
            ProviderEvent::ReasoningSignature(signature) => Some(AgentEvent::Reasoning {
                text: String::new(),
                signature: Some(signature),
                redacted: None,
                item: None,
            }),
            ProviderEvent::RedactedReasoning(data) => Some(AgentEvent::Reasoning {
                text: String::new(),
                signature: None,
                redacted: Some(data),
                item: None,
            }),
            ProviderEvent::ReasoningItem(item) => Some(AgentEvent::Reasoning {
                text: String::new(),
                signature: None,
                redacted: None,
                item: Some(item),
            }),
            ProviderEvent::Finished {
                finish_reason,
                tool_calls,
                usage,
            } => {
                self.finished = true;
                self.status = Some("ok");
                self.usage = Some(usage);
                let metrics = self.legs.metrics();
                metrics.tokens(&self.model.name, &usage);
                self.span
                    .record("gen_ai.usage.input_tokens", usage.input_tokens)
                    .record("gen_ai.usage.output_tokens", usage.output_tokens)
                    .record(
                        "relay.outcome",
                        if tool_calls.is_empty() {
                            "done"
                        } else {
                            "tool_calls"
                        },
                    )
                    .record("gen_ai.response.finish_reasons", finish_reason.as_str());
                let usage = wire_usage(usage);
                Some(if tool_calls.is_empty() {
                    metrics.leg(&self.model.name, "done");
                    AgentEvent::Done {
                        finish_reason: match finish_reason {
                            FinishReason::Length => WireFinish::Length,
                            FinishReason::ContentFilter => WireFinish::ContentFilter,
                            // A tool-calls finish without calls is an ordinary stop.
                            FinishReason::Stop | FinishReason::ToolCalls => WireFinish::Stop,
                        },
                        usage,
                    }
                } else {
                    metrics.leg(&self.model.name, "tool_calls");
                    AgentEvent::ToolCalls {
                        calls: calls::normalise(tool_calls, &self.history_ids)
                            .into_iter()
                            .map(|c| WireCall {
                                id: c.id,
                                name: c.name,
                                arguments: c.arguments,
                            })
                            .collect(),
                        usage,
                    }
                })
            }
        }
    }

    /// The server is stopping past its grace period: the client should retry the leg elsewhere.
    fn shut_down(&mut self) -> AgentEvent {
        self.finished = true;
        self.status = Some("error");
        self.legs.metrics().leg(&self.model.name, "error");
        AgentEvent::Error {
            error: ErrorCode::ProviderUnavailable,
            message: "the relay is shutting down; retry the leg".into(),
            retryable: true,
        }
    }

    fn fail(&mut self, e: &ProviderError) -> AgentEvent {
        self.finished = true;
        self.status = Some("error");
        self.span
            .record("relay.outcome", "error")
            .record("otel.status_code", "ERROR");
        self.legs.metrics().leg(&self.model.name, "error");
        tracing::warn!(model = %self.model.name, error = %e, "leg failed after the headers");
        let (error, retryable) = match e {
            ProviderError::RateLimited { .. } => (ErrorCode::RateLimited, true),
            ProviderError::Connect(_) => (ErrorCode::ProviderUnavailable, true),
            ProviderError::IdleTimeout => (ErrorCode::UpstreamError, true),
            ProviderError::Status { status, .. } => (ErrorCode::UpstreamError, *status >= 500),
            ProviderError::Protocol(_) => (ErrorCode::UpstreamError, true),
            // The same request would most likely bring the same event back.
            ProviderError::EventTooLarge { .. } => (ErrorCode::UpstreamEventTooLarge, false),
        };
        // The upstream connection (and anything it buffered) goes now, not when the client
        // has read the last line.
        self.events = Box::pin(futures::stream::empty());
        AgentEvent::Error {
            error,
            message: e.to_string(),
            retryable,
        }
    }
}

fn wire_usage(u: Usage) -> WireUsage {
    WireUsage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cached_input_tokens: u.cached_input_tokens,
        cache_write_tokens: u.cache_write_tokens,
        reasoning_tokens: u.reasoning_tokens,
    }
}
