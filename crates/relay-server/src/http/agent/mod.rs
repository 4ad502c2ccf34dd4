//! `POST /v1/agent/stream` and `GET /v1/tools`: the agent leg, from admission to the last NDJSON line.
//!
//! Fail early as HTTP, fail late in-band: authentication, validation, rate limit, quota and the
//! first provider output all happen before the headers, so a failing model can be replaced by the
//! next; after the headers every failure is one `error` line.

mod calls;
mod inject;
mod open;
mod quota;
mod request;
mod stream;

use std::time::Instant;

use axum::extract::State;
use axum::response::Response;
use relay_wire::agent::AgentRequest;
use relay_wire::tools::{ToolRole, ToolsResponse, catalogue};
use relay_wire::{ErrorBody, ErrorCode};
use serde::Deserialize;
use tracing::Instrument;
use utoipa::IntoParams;

pub use open::Opened;
pub use quota::Quota;
pub use request::{ValidLeg, project_from, project_of, validate};

use crate::accounts::Caller;
use crate::domain::ProjectId;
use crate::error::{ApiError, ApiResult};
use crate::http::extract::{Json, Query};
use crate::http::state::AppState;

/// Request bodies of agent legs may be this large (long conversations).
pub const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// Run one agent leg and stream it as NDJSON.
///
/// The project's notes are one block placed after the client's system prompt (a system block or
/// message of its own), ranked against the conversation's first user message, so the block is
/// byte-identical on every leg of a conversation until the project's notes change, and the
/// provider's prompt cache of everything before it stays valid. An `anthropic` provider gets
/// cache breakpoints at the end of the tools, of the client's system prompt and at the newest
/// message (three of Anthropic's four); OpenAI's API gets a `prompt_cache_key` derived from the
/// user and the conversation's first user message. `usage` reports `cached_input_tokens` and
/// `cache_write_tokens` as the provider counted them, both part of `input_tokens`.
#[utoipa::path(post, path = "/v1/agent/stream", tag = "agent",
    security(("bearer" = [])),
    request_body = AgentRequest,
    responses(
        (status = 200, description = "NDJSON, one `AgentEvent` per line: `start`, then `text`/`reasoning`/`ping`, then exactly one of `tool_calls`, `done`, `error`",
            content_type = "application/x-ndjson", body = relay_wire::agent::AgentEvent),
        (status = 400, description = "`invalid_request` or `unknown_model`; costs no quota", body = ErrorBody),
        (status = 403, description = "`quota_exceeded`, or `budget_exceeded` (the monthly token budget is used up); costs no quota", body = ErrorBody),
        (status = 429, description = "`rate_limited` (per caller, or every model was rate limited); see Retry-After", body = ErrorBody),
        (status = 502, description = "`upstream_error`: every model failed before any output; `upstream_event_too_large`: the provider sent an event larger than `[routing] max_event_bytes`", body = ErrorBody),
        (status = 503, description = "`provider_unavailable`: no provider could be reached", body = ErrorBody),
    ))]
pub async fn stream_leg(
    State(state): State<AppState>,
    caller: Caller,
    headers: axum::http::HeaderMap,
    Json(body): Json<AgentRequest>,
) -> ApiResult<Response> {
    let arrived = Instant::now();
    // The body is already read here (the extractor), so only the rate limit is checked before
    // validation; quota and budget are decided once, at admission (`open_leg`).
    state.limits().agent.check(caller.user_id()).await?;
    let leg = request::validate(&body)?;
    let request_id = crate::http::extract::request_id(&headers);
    let opened = open_leg(
        &state,
        &caller,
        request_id,
        body.model.as_deref(),
        leg,
        arrived,
    )
    .await?;
    Ok(stream::ndjson(opened.events))
}

/// Everything before the first byte of a leg, for `/v1/agent/stream` and the compatible
/// endpoints alike: the model chain, the rate limit, quota admission beside the note lookup,
/// then the chain until one model answers.
pub async fn open_leg(
    state: &AppState,
    caller: &Caller,
    request_id: String,
    model: Option<&str>,
    mut leg: ValidLeg,
    arrived: Instant,
) -> ApiResult<Opened> {
    leg.key_cache(caller.user_id());
    let chain = state.models().resolve(model).ok_or_else(|| {
        ApiError::new(
            ErrorCode::UnknownModel,
            format!(
                "unknown model `{}`; use auto or one of: {}",
                model.unwrap_or_default(),
                state.models().names().join(", ")
            ),
        )
    })?;
    if chain.is_empty() {
        return Err(ApiError::new(
            ErrorCode::ProviderUnavailable,
            "no model is configured for auto",
        ));
    }
    // The output a call may produce: the client's own cap, within the models' caps and (below)
    // what the account's token budget has left, which the leg reserves before it runs.
    leg.max_tokens = min_cap(
        leg.max_tokens,
        chain
            .iter()
            .filter_map(|m| m.policy.max_output_tokens)
            .min(),
    );
    let hold = crate::usage::budget::reserve(
        state.ledger().store().as_ref(),
        state.default_token_budget(),
        match caller {
            Caller::User(user) => Some(user.id.as_str()),
            Caller::Local => None,
        },
        leg.prompt_estimate,
        leg.max_tokens,
    )
    .await?;
    if let Some(hold) = &hold {
        leg.max_tokens = min_cap(leg.max_tokens, Some(hold.output_cap));
    }
    let reservation = hold.map(|h| h.reservation.id);
    // Admission (a write) and the note lookup (reads) go to the store side by side: a leg waits
    // for the slower of the two, not for both. A refused leg's notes are thrown away.
    let admission = quota::Quota::admit(state, caller);
    let admission = admission.instrument(tracing::info_span!("admission"));
    let lookup = inject::notes(state, caller.user_id(), &leg).instrument(tracing::info_span!(
        "note_lookup",
        relay.project_id = leg.project_id.as_ref().map_or("", ProjectId::as_str)
    ));
    let (quota, injected) = tokio::join!(admission, lookup);
    let quota = match quota {
        Ok(quota) => quota,
        Err(e) => {
            state.ledger().release(reservation);
            return Err(e);
        }
    };
    open::open(
        state.clone(),
        caller.user_id(),
        open::Admitted {
            request_id,
            reservation,
        },
        chain,
        leg,
        injected,
        quota,
        arrived,
    )
    .await
}

/// The smaller of two output caps, either of which may be absent.
fn min_cap(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What a caller of a compatible door must pass before Relay reads its body: its rate limit, a budget not used
/// up and (for an account) a unit of quota left. Cheap reads: the unit itself is taken at
/// admission, after the body is parsed and validated.
pub async fn gate(state: &AppState, caller: &Caller) -> ApiResult<()> {
    state.limits().agent.check(caller.user_id()).await?;
    if let Caller::User(user) = caller {
        // A new month's roll-over makes the cached count stale: the account is read again.
        let fresh = match (state.roll_quota().await?, state.auth()) {
            (true, Some(auth)) => auth.user_by_email(&user.email).await?.map(|(u, _)| u),
            _ => None,
        };
        let user = fresh.as_ref().unwrap_or(user);
        if !user.unlimited() && user.remaining() <= 0 {
            state.metrics().quota_refusals.inc();
            return Err(quota::exceeded(state, user));
        }
        crate::usage::budget::check(
            state.ledger().store().as_ref(),
            state.default_token_budget(),
            Some(user.id.as_str()),
        )
        .await?;
    }
    Ok(())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolsQuery {
    /// `worker`, `orchestrator` or `agent_orchestrator`; absent for the normal role.
    #[serde(default)]
    pub tool_role: Option<ToolRole>,
}

/// The canonical tool catalogue for a role.
#[utoipa::path(get, path = "/v1/tools", tag = "agent",
    security(("bearer" = [])),
    params(ToolsQuery),
    responses(
        (status = 200, description = "The tools that role is sent, with their canonical definitions", body = ToolsResponse),
        (status = 400, description = "Unknown tool_role", body = ErrorBody),
    ))]
pub async fn get_tools(_caller: Caller, Query(q): Query<ToolsQuery>) -> axum::Json<ToolsResponse> {
    axum::Json(ToolsResponse {
        tools: catalogue(q.tool_role),
    })
}
