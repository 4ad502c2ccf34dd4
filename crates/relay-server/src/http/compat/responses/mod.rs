//! `POST /v1/responses`: OpenAI's Responses API (what Codex CLI and `client.responses` speak),
//! streamed and not, answered by whichever model the leg machinery routes to. Relay keeps no
//! responses: each request carries its whole conversation.

pub mod request;
pub mod stream;
pub mod tools;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::door::{self, Door, Translated};
use crate::error::ApiError;
use crate::http::state::AppState;
use crate::legs::DoorLeg;
pub use request::ResponsesRequest;

/// The Responses door.
pub struct Responses;

/// What the answer needs: the tool name table and the request fields the response echoes.
pub struct Context {
    names: tools::Names,
    echo: Value,
}

impl Door for Responses {
    const DOOR: crate::domain::Door = crate::domain::Door::Responses;
    type Request = ResponsesRequest;
    type Context = Context;
    type Answer = stream::Writer;

    fn translate(
        request: ResponsesRequest,
        _client: &serde_json::Map<String, Value>,
    ) -> Result<Translated<Context>, ApiError> {
        let conversation = request::leg_request(&request)?;
        // An `openai_responses` provider gets the client's own body (the door sets it): its
        // namespaced calls come back named `{namespace}__{name}` and its `custom_tool_call`s as
        // calls of one `input` argument (the normaliser's forms), which the same name table maps
        // back as it does for a translated leg.
        let (tools, names) = tools::offer(&request::declared_tools(&request))?;
        let tool_choice = request
            .tool_choice
            .as_ref()
            .map(tools::choice)
            .transpose()?;
        let leg = DoorLeg {
            conversation,
            tools,
            tool_choice,
            stop: Vec::new(),
        };
        let mut echo = Map::new();
        echo.insert("instructions".into(), json!(request.instructions));
        echo.insert("tools".into(), Value::Array(request.tools));
        echo.insert(
            "tool_choice".into(),
            request.tool_choice.unwrap_or_else(|| json!("auto")),
        );
        echo.insert("max_output_tokens".into(), json!(request.max_output_tokens));
        echo.insert("temperature".into(), json!(request.temperature));
        echo.insert("previous_response_id".into(), Value::Null);
        echo.insert("store".into(), json!(false));
        Ok(Translated {
            leg,
            model: request.model,
            stream: request.stream,
            context: Context {
                names,
                echo: Value::Object(echo),
            },
        })
    }

    fn answer(context: Context, model: String) -> stream::Writer {
        stream::Writer::new(model, context.names, context.echo)
    }
}

/// OpenAI Responses. The token is `Authorization: Bearer`.
#[utoipa::path(post, path = "/v1/responses", tag = "compatible",
    security(("bearer" = [])),
    params(
        super::doc::ProjectHeaders,
    ),
    request_body = ResponsesRequest,
    responses(
        (status = 200, description = "A `response` object, or with `stream: true` SSE events `response.created`, `response.in_progress`, per output item `response.output_item.added`/`.done` with its `output_text`, `reasoning_summary_text`, `function_call_arguments` or `custom_tool_call_input` deltas, then exactly one of `response.completed`, `response.incomplete`, `response.failed`; every event has a rising `sequence_number`. `x-relay-note-ids` lists the injected notes. Answered by an `openai_responses` provider (the client's own API family), the body or the events are that provider's own, byte for byte.",
            body = Object, headers(("x-relay-note-ids" = String, description = "Ids of the injected notes, comma-separated"))),
        super::doc::ResponsesErrors,
    ))]
pub async fn responses(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    door::serve::<Responses>(state, headers, body).await
}
