//! The one request → leg → answer sequence every compatible API runs, generic over the API's
//! translation: a new inbound API is a `Door` (parse and translate its request, encode a leg's
//! events in its own wire format) and nothing else.
//!
//! The sequence: the caller, its rate limit, budget and quota (all before the body is read), the
//! body read within `[server] body_timeout_ms` and parsed once, the pass-through policy (`policy`),
//! the request translated into a validated leg (400 naming the field), the leg opened through
//! routing, fallback, rate limit, quota and notes (`Legs::open`, which refunds the unit when
//! no model answers), then the answer streamed as SSE or collected whole, with the notes receipt.
//! Every error before the first byte is answered in the API's own error shape.

use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::response::Response;
use futures::StreamExt;
use relay_wire::agent::{AgentEvent, FinishReason, ToolCall, Usage};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::{Api, errors};
use crate::domain;
use crate::error::ApiError;
use crate::http::state::AppState;
use crate::legs::{DoorCall, DoorLeg, LegEvent};
use crate::providers::passthrough::RawBody;

/// What a door makes of its request: the leg to run and what its answer needs to know.
pub struct Translated<C> {
    pub leg: DoorLeg,
    /// `auto` or a configured model name.
    pub model: String,
    pub stream: bool,
    /// The door's own context for encoding the answer (tool name mappings, echoed fields).
    pub context: C,
}

/// One inbound API's translation.
pub trait Door {
    /// Which door this is: the API family a same-family provider speaks (that provider gets the
    /// client's own body, every field Relay does not own; others the translated leg), the
    /// usage record's route, and whose error shape and identity headers the door uses.
    const DOOR: domain::Door;
    /// Whose error shape the door answers in, from `DOOR`.
    const API: Api = Api::of(Self::DOOR);
    /// The API's request body.
    type Request: DeserializeOwned;
    /// What the encoder needs besides the answering model.
    type Context: Send + 'static;
    /// The encoder of one answer.
    type Answer: Answer;
    /// The request as a leg. `client` is the parsed body the request was read from: a door may
    /// leave large parts out of its request type and read them there, instead of copying them.
    fn translate(
        request: Self::Request,
        client: &Map<String, Value>,
    ) -> Result<Translated<Self::Context>, ApiError>;

    /// The encoder for an answer from `model` (the configured model that answered).
    fn answer(context: Self::Context, model: String) -> Self::Answer;
}

/// The encoding of one leg's events, fed in order up to exactly one terminal event (`serve` makes
/// one up when a leg ends without it); the same encoder serves both answer forms.
pub trait Answer: Send + 'static {
    /// One event of a streamed answer as its wire chunks (possibly none).
    fn event(&mut self, event: AgentEvent) -> Vec<Bytes>;
    /// One event of a non-streamed answer. By default it is encoded as for a stream and the chunks
    /// dropped (the encoder keeps what the whole answer needs); an answer built from the parts
    /// (a `Collected`) keeps them here instead, without encoding chunks no one reads.
    fn collect(&mut self, event: AgentEvent) {
        self.event(event);
    }
    /// The whole answer once every event was fed; a leg that failed is an error answer.
    fn whole(self) -> Result<Response, ApiError>;
}

/// Serves one request through `D`: the handler of a compatible route is this call.
pub async fn serve<D: Door>(state: AppState, headers: HeaderMap, body: Body) -> Response {
    let mut caller = None;
    match run::<D>(state.clone(), headers, body, &mut caller).await {
        Ok(response) => response,
        // The Messages door tells an agent that a cap was reached in the shape Claude Code
        // shows as a usage limit (issue 40); the other doors keep their codes.
        Err(e) if D::API == Api::Anthropic && super::limits::is_cap(&e) => {
            super::limits::billing(&state, caller.as_ref(), e).await
        }
        Err(e) => errors::respond(D::API, e),
    }
}

async fn run<D: Door>(
    state: AppState,
    headers: HeaderMap,
    body: Body,
    caller_out: &mut Option<crate::accounts::Caller>,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    // Who pays is settled before a byte of the body is read: an unauthenticated, rate-limited
    // or spent caller costs Relay no upload (issue 38).
    let caller = caller_out.insert(super::caller(&state, &headers, D::API).await?);
    let caller = &*caller;
    state.legs().gate(caller).await?;
    let body = super::read_body(&state, body).await?;
    // Parsed once, as a map: the door's request type is read from it, and the same map is the
    // client's body a same-family provider gets.
    let mut client: Map<String, Value> = crate::http::extract::parse_json(&body)?;
    let prompt_estimate = super::prompt_estimate(body.len());
    // The policy sees the client's body before the door reads it: a field Relay refuses is
    // named as such, not as something the door cannot translate.
    let chain = super::chain(&state, client.get("model").and_then(Value::as_str));
    // Where a model of the chain speaks the client's family, the body's bytes are kept: that
    // provider is sent the fields Relay leaves alone as the client sent them.
    let same_family = chain.iter().any(|m| D::DOOR.spoken_by(m.provider.kind()));
    let mut bytes = if same_family {
        RawBody::of(body)
    } else {
        drop(body);
        RawBody::default()
    };
    let policies: Vec<&crate::policy::ModelPolicy> = chain.iter().map(|m| &m.policy).collect();
    let policy = crate::policy::Chain(&policies);
    super::apply_policy(&state, caller, D::DOOR, &mut client, &mut bytes, policy).await?;
    let request: D::Request = super::from_map(&client)?;
    let translated = D::translate(request, &client)?;
    let call = DoorCall {
        project_id: super::project(&headers)?,
        prompt_estimate,
        service_tier: client
            .get("service_tier")
            .and_then(Value::as_str)
            .map(str::to_owned),
        passthrough: super::passthrough(
            &state,
            D::DOOR,
            client,
            bytes,
            &headers,
            policy,
            translated.stream,
        ),
    };
    let leg = crate::legs::validate_door(translated.leg, call)?;
    drop(policies);
    let opened = super::open(&state, caller, &headers, &translated.model, leg, arrived).await?;
    let mut answer = D::answer(translated.context, opened.model.clone());
    let response = if translated.stream {
        // A provider of the client's own API family answers the client in its own bytes
        // (`LegEvent::Raw`); the encoder still sees every event, to keep its state, but only
        // Relay's own pings and errors are sent in its form then.
        let raw = opened.raw;
        let events = opened
            .events
            .map(Some)
            .chain(futures::stream::once(async { None }));
        let mut ended = false;
        super::sse(
            events
                .flat_map(move |e| {
                    futures::stream::iter(match e {
                        _ if ended => Vec::new(),
                        Some(LegEvent::Raw(bytes)) => vec![bytes],
                        Some(LegEvent::Wire(event)) => {
                            ended = event.is_terminal();
                            let relays_own =
                                matches!(event, AgentEvent::Ping | AgentEvent::Error { .. });
                            let chunks = answer.event(event);
                            if raw && !relays_own {
                                Vec::new()
                            } else {
                                chunks
                            }
                        }
                        None => answer.event(unfinished()),
                    })
                })
                .boxed(),
        )
    } else {
        opened
            .refunded_if_failed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let mut events = opened.events;
        let mut terminal = None;
        // A provider of the client's family gave its whole answer as it sent it (one JSON
        // document, `providers::whole`): that is the answer, and the events only Relay's account.
        let mut own = Vec::new();
        while let Some(event) = events.next().await {
            let event = match event {
                LegEvent::Raw(bytes) => {
                    own.push(bytes);
                    continue;
                }
                LegEvent::Wire(event) => event,
            };
            if event.is_terminal() {
                terminal = Some(event);
                break;
            }
            answer.collect(event);
        }
        // The leg (and its usage record, which a refunded call does not leave) ends here.
        drop(events);
        let terminal = terminal.unwrap_or_else(unfinished);
        if matches!(terminal, AgentEvent::Error { .. }) {
            // The client gets an error and none of the output: the call cost nothing (SDKs
            // retry a 5xx, and each try would cost a unit otherwise).
            opened.quota.refund().await;
        }
        if own.is_empty() || matches!(terminal, AgentEvent::Error { .. }) {
            answer.collect(terminal);
            answer.whole()?
        } else {
            own_answer(own)
        }
    };
    let response = super::with_receipt(response, &opened.note_ids);
    Ok(if D::API == Api::Anthropic {
        let caps = super::limits::caps(&state, caller, Some(opened.budget)).await;
        super::limits::with_headers(response, caps.as_ref())
    } else {
        response
    })
}

/// A same-family provider's whole answer, byte for byte, as a 200 JSON response.
fn own_answer(parts: Vec<Bytes>) -> Response {
    let body = match <[Bytes; 1]>::try_from(parts) {
        Ok([one]) => one,
        Err(parts) => Bytes::from(parts.concat()),
    };
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The terminal event of a leg that ended without one (the leg machinery always sends one; this
/// is the guard that no answer ends without its terminal form).
fn unfinished() -> AgentEvent {
    AgentEvent::Error {
        error: relay_wire::ErrorCode::UpstreamError,
        message: "the answer ended without a finish".into(),
        retryable: true,
    }
}

/// What a non-streamed answer is made of, gathered from a leg's events: the text, the thinking
/// blocks (in Anthropic's form, signatures included) and the terminal event.
#[derive(Default)]
pub struct Collected {
    text: String,
    thinking: Vec<Value>,
    /// The thinking block being collected (text, signature); a signature closes it.
    open: Option<(String, String)>,
    terminal: Option<AgentEvent>,
}

/// How a whole answer ended.
pub enum Ending {
    Finished(FinishReason),
    ToolCalls(Vec<ToolCall>),
}

/// A finished non-streamed answer.
pub struct Whole {
    pub text: String,
    pub thinking: Vec<Value>,
    pub ending: Ending,
    pub usage: Usage,
}

impl Collected {
    /// Adds one event; nothing after the terminal one counts.
    pub fn add(&mut self, event: AgentEvent) {
        if self.terminal.is_some() {
            return;
        }
        match event {
            AgentEvent::Text { text } => self.text.push_str(&text),
            AgentEvent::Reasoning {
                text,
                signature,
                redacted,
                ..
            } => {
                if let Some(data) = redacted {
                    self.thinking
                        .push(json!({"type": "redacted_thinking", "data": data}));
                }
                let block = self.open.get_or_insert_with(Default::default);
                block.0.push_str(&text);
                if let Some(signature) = signature {
                    block.1 = signature;
                    if let Some((t, s)) = self.open.take() {
                        self.thinking
                            .push(json!({"type": "thinking", "thinking": t, "signature": s}));
                    }
                }
            }
            e if e.is_terminal() => {
                // A block the stream never signed is kept, unsigned.
                if let Some((t, _)) = self.open.take().filter(|(t, _)| !t.is_empty()) {
                    self.thinking
                        .push(json!({"type": "thinking", "thinking": t, "signature": ""}));
                }
                self.terminal = Some(e);
            }
            _ => {}
        }
    }

    /// The answer, or the error the leg ended with.
    pub fn whole(self) -> Result<Whole, ApiError> {
        let (ending, usage) = match self.terminal {
            Some(AgentEvent::Done {
                finish_reason,
                usage,
            }) => (Ending::Finished(finish_reason), usage),
            Some(AgentEvent::ToolCalls { calls, usage }) => (Ending::ToolCalls(calls), usage),
            Some(AgentEvent::Error { error, message, .. }) => {
                return Err(ApiError::new(error, message));
            }
            Some(_) | None => {
                return Err(ApiError::internal("a leg ended on a non-terminal event"));
            }
        };
        Ok(Whole {
            text: self.text,
            thinking: self.thinking,
            ending,
            usage,
        })
    }
}
