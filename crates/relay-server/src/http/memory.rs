//! Project memory endpoints (spec §4.4, CONTRACT.md Notes).
//!
//! Identity comes only from the token; another user's note answers exactly like a missing one.
//! When the store is unavailable every answer is 503 with the usual shape emptied.

use axum::extract::{Path, State};
use relay_wire::ErrorBody;
use relay_wire::emptied::{DeleteEmptied, ListEmptied, OkEmptied, RecallEmptied};
use relay_wire::memory::{
    DeleteRequest, DeleteResponse, ListQuery, ListResponse, MemoryNote, PatchRequest,
    PatchResponse, ProjectSelector, RecallResponse, RememberRequest, RememberResponse,
};

use crate::accounts::Caller;
use crate::domain::{Author, MemType, NoteId, NoteText, ProjectId};
use crate::error::{ApiError, ApiResult, Shaped};
use crate::http::extract::{Json, MaybeCaller, Query};
use crate::http::state::AppState;
use crate::store::NewNote;

/// `limit` of list when none is given, and the most it returns.
const LIST_DEFAULT: i64 = 50;
const LIST_MAX: i64 = 200;

/// A handler's answer: its 503 carries the emptied shape `S` (spec §4.4 rule 4).
type Answer<T, S> = Result<axum::Json<T>, Shaped<S>>;

fn required_project(project_id: Option<&str>, project: Option<&str>) -> ApiResult<ProjectId> {
    ProjectId::from_pair(project_id, project)
        .map_err(ApiError::invalid)?
        .ok_or_else(|| ApiError::invalid("project_id is required (or its alias project)"))
}

/// Store a note in a project.
#[utoipa::path(post, path = "/v1/memory/remember", tag = "memory",
    security(("bearer" = [])),
    request_body = RememberRequest,
    responses(
        (status = 200, description = "Stored (or an equal note was already there): `{ok: true, id}`, the note's id", body = RememberResponse),
        (status = 400, description = "Missing or invalid note, project_id, author or mem_type", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, with `ok: false`", body = OkEmptied),
    ))]
pub async fn remember(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Json(body): Json<RememberRequest>,
) -> Answer<RememberResponse, OkEmptied> {
    let caller = caller?;
    let project_id = required_project(body.project_id.as_deref(), body.project.as_deref())?;
    let text = NoteText::parse(&body.note, "note").map_err(ApiError::invalid)?;
    let author = Author::parse(body.author.as_deref()).map_err(ApiError::invalid)?;
    let mem_type = MemType::parse(body.mem_type.as_deref()).map_err(ApiError::invalid)?;
    let stored = state
        .memory()
        .remember(NewNote {
            user_id: caller.user_id().to_owned(),
            project_id,
            text,
            author,
            mem_type,
            created_at: round_ms(crate::clock::now()),
        })
        .await?;
    Ok(axum::Json(RememberResponse {
        ok: true,
        id: stored.id.into_string(),
    }))
}

/// Seconds with a millisecond fraction, as the contract shows `created_at`.
fn round_ms(t: f64) -> f64 {
    (t * 1000.0).round() / 1000.0
}

async fn recall(
    state: &AppState,
    caller: Result<Caller, ApiError>,
    selector: &ProjectSelector,
) -> Result<RecallResponse, Shaped<RecallEmptied>> {
    let caller = caller?;
    let project_id = required_project(selector.project_id.as_deref(), selector.project.as_deref())?;
    let notes = state
        .memory()
        .recall(
            caller.user_id(),
            project_id.as_str(),
            state.config().memory.recall_limit,
        )
        .await?;
    Ok(RecallResponse { notes })
}

/// A project's note texts, oldest first (the newest 200 by default).
#[utoipa::path(get, path = "/v1/memory/recall", tag = "memory",
    security(("bearer" = [])),
    params(ProjectSelector),
    responses(
        (status = 200, description = "Note texts, oldest first", body = RecallResponse),
        (status = 400, description = "No project id", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, with `notes: []`", body = RecallEmptied),
    ))]
pub async fn get_recall(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Query(selector): Query<ProjectSelector>,
) -> Answer<RecallResponse, RecallEmptied> {
    recall(&state, caller, &selector).await.map(axum::Json)
}

/// The same as `GET /v1/memory/recall`, with the project in a JSON body.
#[utoipa::path(post, path = "/v1/memory/recall", tag = "memory",
    security(("bearer" = [])),
    request_body = ProjectSelector,
    responses(
        (status = 200, description = "Note texts, oldest first", body = RecallResponse),
        (status = 400, description = "No project id", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, with `notes: []`", body = RecallEmptied),
    ))]
pub async fn post_recall(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Json(selector): Json<ProjectSelector>,
) -> Answer<RecallResponse, RecallEmptied> {
    recall(&state, caller, &selector).await.map(axum::Json)
}

/// A page of the caller's notes, in one project or across all.
#[utoipa::path(get, path = "/v1/memory/list", tag = "memory",
    security(("bearer" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "Oldest first, ties by id", body = ListResponse),
        (status = 400, description = "Negative limit or offset, or a bad project id", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, with `total: 0, items: []`", body = ListEmptied),
    ))]
pub async fn list_notes(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Query(query): Query<ListQuery>,
) -> Answer<ListResponse, ListEmptied> {
    let caller = caller?;
    let project_id = ProjectId::from_pair(query.project_id.as_deref(), query.project.as_deref())
        .map_err(ApiError::invalid)?;
    let limit = query.limit.unwrap_or(LIST_DEFAULT);
    let offset = query.offset.unwrap_or(0);
    if limit < 0 {
        return Err(ApiError::invalid("limit must not be negative").into());
    }
    if offset < 0 {
        return Err(ApiError::invalid("offset must not be negative").into());
    }
    let (total, notes) = state
        .memory()
        .list_notes(
            caller.user_id(),
            project_id.as_ref().map(ProjectId::as_str),
            u32::try_from(limit.min(LIST_MAX)).unwrap_or(0),
            offset.unsigned_abs(),
        )
        .await?;
    Ok(axum::Json(ListResponse {
        total,
        items: notes.into_iter().map(MemoryNote::from).collect(),
    }))
}

/// Delete one note, one project's notes, or (with `all: true`) every note of the caller.
#[utoipa::path(post, path = "/v1/memory/delete", tag = "memory",
    security(("bearer" = [])),
    request_body = DeleteRequest,
    responses(
        (status = 200, description = "How many notes went", body = DeleteResponse),
        (status = 400, description = "No selector, `{all: false}` alone, or a selector of the wrong type", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, with `ok: false, deleted: 0`", body = DeleteEmptied),
    ))]
pub async fn delete_notes(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Json(body): Json<DeleteRequest>,
) -> Answer<DeleteResponse, DeleteEmptied> {
    let caller = caller?;
    let memory = state.memory();
    let user = caller.user_id();
    // Priority when several selectors are present: id, then project_id, then all (spec §4.4 rule 3).
    let deleted = if let Some(id) = &body.id {
        let Some(id) = NoteId::parse(id) else {
            return Ok(axum::Json(DeleteResponse {
                ok: true,
                deleted: 0,
            }));
        };
        memory.delete_note(user, &id).await
    } else if let Some(project) =
        ProjectId::from_pair(body.project_id.as_deref(), body.project.as_deref())
            .map_err(ApiError::invalid)?
    {
        memory.delete_project(user, project.as_str()).await
    } else if body.all == Some(true) {
        erase_all(&state, user).await
    } else {
        return Err(ApiError::invalid(
            "give exactly one selector: {id}, {project_id} or {all: true}",
        )
        .into());
    }?;
    Ok(axum::Json(DeleteResponse { ok: true, deleted }))
}

/// The GDPR cascade: every note of the user, then the usage records (they name projects); the
/// month's token count stays, so erasure does not reset a budget.
async fn erase_all(state: &AppState, user_id: &str) -> crate::store::StoreResult<u64> {
    let deleted = state.memory().delete_all_notes(user_id).await?;
    state
        .ledger()
        .store()
        .delete_user_legs(user_id, false)
        .await?;
    Ok(deleted)
}

/// Delete one project's notes, or without `project_id` every note of the caller (the GDPR cascade).
#[utoipa::path(delete, path = "/v1/memory/all", tag = "memory",
    security(("bearer" = [])),
    params(ProjectSelector),
    responses(
        (status = 200, description = "How many notes went", body = DeleteResponse),
        (status = 400, description = "A bad project id", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, with `ok: false, deleted: 0`", body = DeleteEmptied),
    ))]
pub async fn delete_all_notes(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Query(selector): Query<ProjectSelector>,
) -> Answer<DeleteResponse, DeleteEmptied> {
    let caller = caller?;
    let project = ProjectId::from_pair(selector.project_id.as_deref(), selector.project.as_deref())
        .map_err(ApiError::invalid)?;
    let deleted = match project {
        Some(p) => {
            state
                .memory()
                .delete_project(caller.user_id(), p.as_str())
                .await
        }
        None => erase_all(&state, caller.user_id()).await,
    }?;
    Ok(axum::Json(DeleteResponse { ok: true, deleted }))
}

/// Delete one note by id (`#` percent-encoded as `%23`).
#[utoipa::path(delete, path = "/v1/memory/{id}", tag = "memory",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "Note id, e.g. `mem%23u_ab%23p1%233`")),
    responses(
        (status = 200, description = "`deleted` is 1, or 0 when no such note is the caller's", body = DeleteResponse),
        (status = 503, description = "`store_unavailable`, with `ok: false, deleted: 0`", body = DeleteEmptied),
    ))]
pub async fn delete_note(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Path(id): Path<String>,
) -> Answer<DeleteResponse, DeleteEmptied> {
    let caller = caller?;
    let Some(id) = NoteId::parse(&id) else {
        return Ok(axum::Json(DeleteResponse {
            ok: true,
            deleted: 0,
        }));
    };
    let deleted = state.memory().delete_note(caller.user_id(), &id).await?;
    Ok(axum::Json(DeleteResponse { ok: true, deleted }))
}

/// Edit a note's text (`content`, or its alias `note`); `pinned` is accepted and ignored.
#[utoipa::path(patch, path = "/v1/memory/{id}", tag = "memory",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "Note id, e.g. `mem%23u_ab%23p1%233`")),
    request_body = PatchRequest,
    responses(
        (status = 200, description = "The note as it is now", body = PatchResponse),
        (status = 400, description = "Empty or too long content, or a body with none of `content`, `note` and `pinned`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such note of the caller", body = ErrorBody),
        (status = 503, description = "`store_unavailable`, with `ok: false`", body = OkEmptied),
    ))]
pub async fn patch_note(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    Path(id): Path<String>,
    Json(body): Json<PatchRequest>,
) -> Answer<PatchResponse, OkEmptied> {
    let caller = caller?;
    let id = NoteId::parse(&id).ok_or_else(|| ApiError::not_found("no such note"))?;
    let memory = state.memory();
    // `note` is the name every other memory call gives a note's text; `content` (the spec's) wins.
    let edit = match (&body.content, &body.note) {
        (Some(content), _) => Some((content, "content")),
        (None, Some(note)) => Some((note, "note")),
        (None, None) => None,
    };
    if edit.is_none() && body.pinned.is_none() {
        // An empty change would answer 200 and change nothing, hiding a misspelt field.
        return Err(ApiError::invalid(
            "give content (or its alias note) with the new text, or pinned",
        )
        .into());
    }
    let note = match edit {
        Some((content, field)) => {
            let text = NoteText::parse(content, field).map_err(ApiError::invalid)?;
            memory.edit_note(caller.user_id(), &id, &text).await
        }
        // Nothing to change (only `pinned`, which is a no-op): answer with the note as it is.
        None => memory.get_note(caller.user_id(), &id).await,
    }?
    .ok_or_else(|| ApiError::not_found("no such note"))?;
    Ok(axum::Json(PatchResponse {
        ok: true,
        item: note.into(),
    }))
}
