//! `GET /v1/models`: OpenAI's list shape, with `auto` and every configured model name.

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

/// The models the compatible endpoints accept.
#[utoipa::path(get, path = "/v1/models", tag = "compatible",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`auto` first, then every configured model", body = ModelList),
        (status = 401, description = "OpenAI's error shape: `{error: {message, type, code}}`", body = super::openai::OpenAiErrorBody),
    ))]
pub async fn list_models(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(e) = super::caller(&state, &headers, Api::OpenAi).await {
        return errors::respond(Api::OpenAi, e);
    }
    let created = super::now_secs();
    let models = state.models();
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
