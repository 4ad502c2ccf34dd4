//! The API's index: every route Relay serves, each registered with its documentation.
//!
//! Routes are added only through `routes!`, which takes the handler's `#[utoipa::path]`, so a route
//! cannot exist without its entry in `/openapi.json` and `/docs`. `tests/api/docs.rs` fails the build
//! if a route is added any other way.

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{
    accounts, admin, agent, compat, console, docs, health, keys, mcp, memory, metrics, search,
    signin, suggest, telemetry, waitlist,
};
use crate::http::state::AppState;

pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(docs::base())
        // Accounts (spec §4.1, §5)
        .routes(routes!(accounts::signup))
        .routes(routes!(accounts::signin))
        .routes(routes!(accounts::signout))
        .routes(routes!(accounts::get_me))
        .routes(routes!(waitlist::join_waitlist))
        // Agents sign in: the OAuth device flow and its verification page (issue 40)
        .routes(routes!(signin::oauth::get_metadata))
        .routes(routes!(signin::oauth::device_authorization))
        .routes(routes!(signin::oauth::token))
        .routes(routes!(signin::oauth::revoke))
        .routes(routes!(signin::device::get_device_page))
        .routes(routes!(
            signin::device::get_device,
            signin::device::decide_device
        ))
        .routes(routes!(admin::delete_user_sessions))
        .routes(routes!(admin::delete_user_lock))
        // Managed settings for agents (issue 40)
        .routes(routes!(signin::settings::get_managed_settings))
        .routes(routes!(
            signin::settings::get_shared_settings,
            signin::settings::put_shared_settings,
            signin::settings::delete_shared_settings
        ))
        .routes(routes!(
            signin::settings::get_user_settings,
            signin::settings::put_user_settings,
            signin::settings::delete_user_settings
        ))
        // Usage limits and telemetry for signed-in agents (issue 40)
        .routes(routes!(signin::usage::get_usage))
        .routes(with_body_limit(
            routes!(telemetry::post_metrics),
            telemetry::BODY_LIMIT,
        ))
        .routes(with_body_limit(
            routes!(telemetry::post_logs),
            telemetry::BODY_LIMIT,
        ))
        .routes(with_body_limit(
            routes!(telemetry::post_traces),
            telemetry::BODY_LIMIT,
        ))
        // API keys (issue 40)
        .routes(routes!(keys::create_key, keys::list_keys))
        .routes(routes!(keys::revoke_key))
        .routes(routes!(keys::admin_list_keys))
        .routes(routes!(keys::admin_revoke_key))
        // Account administration (issue 16)
        .routes(routes!(admin::list_users, admin::create::create_user))
        .routes(routes!(admin::patch_user, admin::delete_user))
        // Agent streaming (spec §4.2, §2.8, §2.9)
        .routes(with_body_limit(
            routes!(agent::stream_leg),
            agent::BODY_LIMIT,
        ))
        .routes(routes!(agent::get_tools))
        // OpenAI- and Anthropic-compatible endpoints (issue 15)
        .routes(routes!(compat::models::list_models))
        .routes(routes!(compat::models::get_model))
        .routes(with_body_limit(
            routes!(compat::openai::chat_completions),
            compat::BODY_LIMIT,
        ))
        .routes(with_body_limit(
            routes!(compat::anthropic::messages),
            compat::BODY_LIMIT,
        ))
        // Codex and the Responses API; Claude Code's token counting (issue 33)
        .routes(with_body_limit(
            routes!(compat::responses::responses),
            compat::BODY_LIMIT,
        ))
        .routes(with_body_limit(
            routes!(compat::count_tokens::count_tokens),
            compat::BODY_LIMIT,
        ))
        // The usage ledger (issue 35)
        .routes(routes!(super::usage::get_usage))
        .routes(routes!(super::usage::get_usage_legs))
        .routes(routes!(super::usage::get_admin_usage))
        .routes(routes!(super::usage_legs::get_admin_usage_legs))
        // Project memory (spec §4.4)
        .routes(routes!(memory::remember))
        .routes(routes!(memory::get_recall, memory::post_recall))
        .routes(routes!(memory::list_notes))
        .routes(routes!(memory::delete_notes))
        .routes(routes!(memory::delete_all_notes))
        .routes(routes!(memory::delete_note, memory::patch_note))
        // The notes as MCP tools, for Claude Code and Codex (issue 41)
        .routes(with_mcp(routes!(
            mcp::post_mcp,
            mcp::get_mcp,
            mcp::delete_mcp
        )))
        // Suggestions and web search (spec §4.1, §4.3)
        .routes(routes!(suggest::suggest))
        .routes(routes!(search::search))
        // Operations (spec §4.3)
        .routes(routes!(health::get_healthz))
        .routes(routes!(health::get_readyz))
        .routes(routes!(metrics::get_metrics))
        .routes(routes!(docs::get_openapi))
        .routes(routes!(docs::get_docs))
        .routes(routes!(docs::get_docs_asset))
        // The web console (issue 16)
        .routes(routes!(console::get_console))
        .routes(routes!(console::get_console_asset))
        .routes(routes!(console::get_root))
}

/// Lets one route take larger bodies than the 1 MiB every other route is held to.
fn with_body_limit(
    (schemas, paths, router): utoipa_axum::router::UtoipaMethodRouter<AppState>,
    limit: usize,
) -> utoipa_axum::router::UtoipaMethodRouter<AppState> {
    (
        schemas,
        paths,
        router.layer(axum::extract::DefaultBodyLimit::max(limit)),
    )
}

/// Hands `/mcp`'s handlers the one MCP service (its sessions live there) that this router serves.
fn with_mcp(
    (schemas, paths, router): utoipa_axum::router::UtoipaMethodRouter<AppState>,
) -> utoipa_axum::router::UtoipaMethodRouter<AppState> {
    (
        schemas,
        paths,
        router.layer(axum::Extension(mcp::Mcp::new())),
    )
}

/// The OpenAPI document alone, as `relay openapi` prints it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = api().into_openapi();
    docs::add_unauthorized_responses(&mut doc);
    docs::add_guard_responses(&mut doc);
    docs::plain_summaries(&mut doc);
    crate::http::openapi_examples::add_examples(&mut doc);
    doc
}
