//! The OpenAPI description the three doors share, written once instead of on each route: the
//! headers that name the project whose notes are injected, and the refusals every door answers,
//! in its API's error shape.

use std::collections::BTreeMap;

use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required, Response, ResponseBuilder};
use utoipa::{IntoParams, IntoResponses};

/// `x-relay-project`, `x-relay-git-remote` and `x-relay-cwd`, in the order a door reads them.
pub struct ProjectHeaders;

impl IntoParams for ProjectHeaders {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        [
            ("x-relay-project", "The project whose notes are injected"),
            (
                "x-relay-git-remote",
                "Without x-relay-project: the project derived from the git remote",
            ),
            (
                "x-relay-cwd",
                "Without either: the project derived from the working directory",
            ),
        ]
        .into_iter()
        .map(|(name, description)| {
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(description))
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(SchemaType::from_iter([Type::String, Type::Null])),
                ))
                .build()
        })
        .collect()
    }
}

/// What the pass-through policy refuses, on every door.
const POLICY_400: &str = "`invalid_request_error` naming the field, also for what the \
     pass-through policy refuses (`n` above 1, a tier, billed extras or a provider-run tool the \
     model does not allow, provider-side state) and for a model the account may not use (code \
     `model_not_allowed`)";

/// The refusals of the Chat Completions door.
pub struct ChatErrors;
/// The refusals of the Responses door.
pub struct ResponsesErrors;
/// The refusals of the Messages door.
pub struct MessagesErrors;

impl IntoResponses for ChatErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        openai(POLICY_400.to_owned())
    }
}

impl IntoResponses for ResponsesErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        openai(format!(
            "{POLICY_400}; `previous_response_id` too (Relay keeps no responses)"
        ))
    }
}

impl IntoResponses for MessagesErrors {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        let mut all = common("AnthropicErrorBody", POLICY_400, "`request_too_large`");
        // A reached cap is a usage limit Claude Code shows (issue 40), not a 403.
        all.insert(
            "429".into(),
            error(
                "AnthropicErrorBody",
                "`rate_limit_error` for the account's rate limit (see Retry-After); \
                 `billing_error` once its quota, token budget or spend budget is used up, with \
                 `retry-after` to the reset, `x-should-retry: false` and the \
                 `anthropic-ratelimit-unified-*` headers",
            ),
        );
        all
    }
}

/// An OpenAI door's refusals, with its own 400 text.
fn openai(invalid: String) -> BTreeMap<String, RefOr<Response>> {
    let mut all = common("OpenAiErrorBody", &invalid, "`invalid_request_error`");
    all.insert(
        "403".into(),
        error(
            "OpenAiErrorBody",
            "`permission_error` with code `quota_exceeded` or `budget_exceeded`",
        ),
    );
    all.insert(
        "429".into(),
        error("OpenAiErrorBody", "`rate_limit_error`; see Retry-After"),
    );
    all
}

/// The refusals every door answers alike, in the error body `schema`.
fn common(schema: &str, invalid: &str, too_large: &str) -> BTreeMap<String, RefOr<Response>> {
    let too_large = format!("{too_large}: the body is larger than 16 MiB");
    [
        ("400", invalid),
        ("401", "`authentication_error`"),
        (
            "408",
            "The body did not arrive within `[server] body_timeout_ms`",
        ),
        ("413", too_large.as_str()),
        ("502", "Every model failed before answering"),
        ("503", "No provider could be reached"),
    ]
    .into_iter()
    .map(|(status, description)| (status.to_owned(), error(schema, description)))
    .collect()
}

fn error(schema: &str, description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name(schema)))
                .build(),
        )
        .build()
        .into()
}
