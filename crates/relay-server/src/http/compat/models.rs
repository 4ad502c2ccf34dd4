//! `GET /v1/models`: OpenAI's list shape, with `auto` and every configured model name; in
//! Anthropic's shape when the request carries `anthropic-version` (Claude Code's model discovery).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::{Api, errors};
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
    /// Always false: the whole list is one page.
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

/// The models the compatible endpoints accept. The token is `Authorization: Bearer` or `x-api-key`.
#[utoipa::path(get, path = "/v1/models", tag = "compatible",
    security(("bearer" = [])),
    params(
        ("x-api-key" = Option<String>, Header, description = "The token, as the Anthropic SDK sends it"),
        ("anthropic-version" = Option<String>, Header, description = "Present: the list and errors take Anthropic's shape"),
    ),
    responses(
        (status = 200, description = "`auto` first, then every configured model; with `anthropic-version`, Anthropic's `{data: [{type, id, display_name, created_at}], has_more, first_id, last_id}`", body = ModelList),
        (status = 401, description = "OpenAI's error shape: `{error: {message, type, code}}`", body = super::openai::OpenAiErrorBody),
    ))]
pub async fn list_models(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let api = if headers.contains_key("anthropic-version") {
        Api::Anthropic
    } else {
        Api::OpenAi
    };
    // Either token header, whichever SDK lists the models.
    if let Err(e) = super::caller(&state, &headers, Api::Anthropic).await {
        return errors::respond(api, e);
    }
    let models = state.models();
    if api == Api::Anthropic {
        let created_at = rfc3339(super::now_secs());
        let data: Vec<AnthropicModel> = std::iter::once("auto")
            .chain(models.entries().iter().map(|m| m.name.as_str()))
            .map(|id| AnthropicModel {
                kind: "model",
                id: id.to_owned(),
                display_name: id.to_owned(),
                created_at: created_at.clone(),
            })
            .collect();
        return axum::Json(AnthropicModelList {
            first_id: data.first().map(|m| m.id.clone()),
            last_id: data.last().map(|m| m.id.clone()),
            has_more: false,
            data,
        })
        .into_response();
    }
    let created = super::now_secs();
    let data = std::iter::once(ModelCard {
        id: "auto".into(),
        object: "model",
        created,
        owned_by: "relay".into(),
    })
    .chain(models.entries().iter().map(|m| ModelCard {
        id: m.name.clone(),
        object: "model",
        created,
        owned_by: m.provider_name.clone(),
    }))
    .collect();
    axum::Json(ModelList {
        object: "list",
        data,
    })
    .into_response()
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
