//! The API's index: every route Relay serves, each registered with its documentation.
//!
//! Routes are added only through `routes!`, which takes the handler's `#[utoipa::path]`, so a route
//! cannot exist without its entry in `/openapi.json` and `/docs`. `tests/api/docs.rs` fails the build
//! if a route is added any other way.

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;
use crate::{accounts, docs, health, memory, metrics, waitlist};

pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(docs::base())
        // Accounts (spec §4.1, §5)
        .routes(routes!(accounts::signup))
        .routes(routes!(accounts::signin))
        .routes(routes!(accounts::signout))
        .routes(routes!(accounts::get_me))
        .routes(routes!(waitlist::join_waitlist))
        // Project memory (spec §4.4)
        .routes(routes!(memory::remember))
        .routes(routes!(memory::get_recall, memory::post_recall))
        .routes(routes!(memory::list_notes))
        .routes(routes!(memory::delete_notes))
        .routes(routes!(memory::delete_all_notes))
        .routes(routes!(memory::delete_note, memory::patch_note))
        // Operations (spec §4.3)
        .routes(routes!(health::get_healthz))
        .routes(routes!(health::get_readyz))
        .routes(routes!(metrics::get_metrics))
        .routes(routes!(docs::get_openapi))
        .routes(routes!(docs::get_docs))
}

/// The OpenAPI document alone, as `relay openapi` prints it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    api().into_openapi()
}
