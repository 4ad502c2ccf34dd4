//! `GET /v1/models` and `GET /v1/models/{model_id}`: OpenAI's shapes, with `auto` and every
//! configured model name; in Anthropic's shapes (the list paged by `limit`, `after_id` and
//! `before_id`) when the request carries `anthropic-version` (Claude Code's model discovery).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use relay_wire::ErrorCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{Api, errors};
use crate::error::ApiError;
use crate::http::state::AppState;

/// `{object: "list", data: [...]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<ModelCard>,
}

/// One model a compatible request can name.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelCard {
    /// `auto` or a configured model name.
    pub id: String,
    /// Always `model`.
    pub object: &'static str,
    /// Unix seconds (the time of the answer: models come from configuration).
    pub created: i64,
    /// The provider that serves it (`relay` for `auto`).
    pub owned_by: String,
}

/// Anthropic's `{data, has_more, first_id, last_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AnthropicModelList {
    pub data: Vec<AnthropicModel>,
    /// Whether more models lie past this page (before it, when paging with `before_id`).
    pub has_more: bool,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
}

/// One model in Anthropic's shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct AnthropicModel {
    /// Always `model`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
    pub display_name: String,
    /// RFC 3339 (the time of the answer: models come from configuration).
    pub created_at: String,
}

/// Paging of Anthropic's list (`GET /v1/models` with `anthropic-version`); OpenAI's list has no
/// paging and ignores these.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ModelsQuery {
    /// Models per page, 1 to 1000 (Anthropic's shape only). Without it the whole list is one page.
    pub limit: Option<String>,
    /// The page after this model id (Anthropic's shape only).
    pub after_id: Option<String>,
    /// The page before this model id (Anthropic's shape only).
    pub before_id: Option<String>,
}

/// The most models one page may hold (Anthropic's bound).
const MAX_LIMIT: usize = 1000;

/// Which API's shape the caller speaks: Anthropic's when it sends `anthropic-version` (as every
/// Anthropic SDK and Claude Code do), else OpenAI's.
fn api_of(headers: &HeaderMap) -> Api {
    if headers.contains_key("anthropic-version") {
        Api::Anthropic
    } else {
        Api::OpenAi
    }
}

/// `auto`, then every configured model the caller may use: (id, provider).
fn catalogue(state: &AppState, caller: &crate::accounts::Caller) -> Vec<(String, String)> {
    let may_use = |name: &str| match caller {
        crate::accounts::Caller::User(user) => user.may_use(name),
        crate::accounts::Caller::Local => true,
    };
    std::iter::once(("auto".to_owned(), "relay".to_owned()))
        .chain(
            state
                .models()
                .entries()
                .iter()
                .filter(|m| may_use(&m.name))
                .map(|m| (m.name.clone(), m.provider_name.clone())),
        )
        .collect()
}

/// The slice of `ids` a page covers, and whether more lie beyond it (after it, or before it with
/// `before_id`).
fn page(
    len: usize,
    position: impl Fn(&str) -> Option<usize>,
    q: &ModelsQuery,
) -> Result<(std::ops::Range<usize>, bool), ApiError> {
    let limit = match q.limit.as_deref() {
        None => len.max(1),
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                ApiError::invalid(format!("limit: a whole number from 1 to {MAX_LIMIT}"))
            })?,
    };
    let find = |field: &str, id: &str| {
        position(id)
            .ok_or_else(|| ApiError::invalid(format!("{field}: no model `{id}` in the list")))
    };
    match (q.after_id.as_deref(), q.before_id.as_deref()) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "after_id and before_id: give one of them, not both",
        )),
        (None, Some(before)) => {
            let end = find("before_id", before)?;
            let start = end.saturating_sub(limit);
            Ok((start..end, start > 0))
        }
        (after, None) => {
            let start = match after {
                Some(after) => find("after_id", after)? + 1,
                None => 0,
            };
            let end = start.saturating_add(limit).min(len);
            Ok((start..end, end < len))
        }
    }
}

fn openai_card(id: String, owned_by: String, created: i64) -> ModelCard {
    ModelCard {
        id,
        object: "model",
        created,
        owned_by,
    }
}

fn anthropic_model(id: String, created_at: String) -> AnthropicModel {
    AnthropicModel {
        kind: "model",
        display_name: id.clone(),
        id,
        created_at,
    }
}

/// The models the compatible endpoints accept. The token is `Authorization: Bearer` or `x-api-key`.
#[utoipa::path(get, path = "/v1/models", tag = "compatible",
    security(("bearer" = [])),
    params(
        ModelsQuery,
        ("x-api-key" = Option<String>, Header, description = "The token, as the Anthropic SDK sends it"),
        ("anthropic-version" = Option<String>, Header, description = "Present: the list and errors take Anthropic's shape, paged by `limit`, `after_id` and `before_id`"),
    ),
    responses(
        (status = 200, description = "`auto` first, then every configured model the caller may use (`allowed_models`); with `anthropic-version`, Anthropic's `{data: [{type, id, display_name, created_at}], has_more, first_id, last_id}`, one page of it", body = ModelList),
        (status = 400, description = "With `anthropic-version`: a bad `limit`, an `after_id` or `before_id` not in the list, or both (`invalid_request_error`)", body = super::anthropic::AnthropicErrorBody),
        (status = 401, description = "OpenAI's error shape: `{error: {message, type, code}}`", body = super::openai::OpenAiErrorBody),
    ))]
pub async fn list_models(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<ModelsQuery>, QueryRejection>,
) -> Response {
    let api = api_of(&headers);
    // Either token header, whichever SDK lists the models.
    let caller = match super::caller(&state, &headers, Api::Anthropic).await {
        Ok(caller) => caller,
        Err(e) => return errors::respond(api, e),
    };
    let models = catalogue(&state, &caller);
    if api == Api::Anthropic {
        let query = match query {
            Ok(Query(q)) => q,
            Err(_) => {
                return errors::respond(api, ApiError::invalid("the query string is malformed"));
            }
        };
        let position = |id: &str| models.iter().position(|(m, _)| m == id);
        let (range, has_more) = match page(models.len(), position, &query) {
            Ok(p) => p,
            Err(e) => return errors::respond(api, e),
        };
        let created_at = rfc3339(super::now_secs());
        let data: Vec<AnthropicModel> = models[range]
            .iter()
            .map(|(id, _)| anthropic_model(id.clone(), created_at.clone()))
            .collect();
        return axum::Json(AnthropicModelList {
            first_id: data.first().map(|m| m.id.clone()),
            last_id: data.last().map(|m| m.id.clone()),
            has_more,
            data,
        })
        .into_response();
    }
    let created = super::now_secs();
    let data = models
        .into_iter()
        .map(|(id, owned_by)| openai_card(id, owned_by, created))
        .collect();
    axum::Json(ModelList {
        object: "list",
        data,
    })
    .into_response()
}

/// One model the compatible endpoints accept, in the caller's API shape (Anthropic's with
/// `anthropic-version`, as the list).
#[utoipa::path(get, path = "/v1/models/{model_id}", tag = "compatible",
    security(("bearer" = [])),
    params(
        ("model_id" = String, Path, description = "`auto` or a configured model name"),
        ("x-api-key" = Option<String>, Header, description = "The token, as the Anthropic SDK sends it"),
        ("anthropic-version" = Option<String>, Header, description = "Present: the model and errors take Anthropic's shape (`{type, id, display_name, created_at}`)"),
    ),
    responses(
        (status = 200, description = "The model as the list shows it: OpenAI's `{id, object, created, owned_by}`, or with `anthropic-version` Anthropic's `{type, id, display_name, created_at}`", body = ModelCard),
        (status = 401, description = "In the caller's API shape", body = super::openai::OpenAiErrorBody),
        (status = 404, description = "No such model: OpenAI's `{error: {type: \"invalid_request_error\", code: \"model_not_found\"}}` or Anthropic's `not_found_error`", body = super::openai::OpenAiErrorBody),
    ))]
pub async fn get_model(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(model_id): Path<String>,
) -> Response {
    let api = api_of(&headers);
    let caller = match super::caller(&state, &headers, Api::Anthropic).await {
        Ok(caller) => caller,
        Err(e) => return errors::respond(api, e),
    };
    let Some((id, owned_by)) = catalogue(&state, &caller)
        .into_iter()
        .find(|(id, _)| *id == model_id)
    else {
        return not_found(api, &model_id);
    };
    match api {
        Api::Anthropic => {
            axum::Json(anthropic_model(id, rfc3339(super::now_secs()))).into_response()
        }
        Api::OpenAi => axum::Json(openai_card(id, owned_by, super::now_secs())).into_response(),
    }
}

/// OpenAI's answer to an unknown model (`model_not_found`, as its API answers), or Anthropic's
/// `not_found_error`.
fn not_found(api: Api, model_id: &str) -> Response {
    let message = format!("the model `{model_id}` does not exist; see GET /v1/models");
    let body = match api {
        Api::OpenAi => serde_json::json!({"error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }}),
        Api::Anthropic => errors::body(api, ErrorCode::NotFound, &message),
    };
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (Howard Hinnant's days-to-civil algorithm).
fn rfc3339(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(1_795_000_000), "2026-11-18T11:06:40Z");
    }
}
