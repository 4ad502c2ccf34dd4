//! Project memory: notes (spec §2.1, §2.2, §4.4; CONTRACT.md, Notes).
//!
//! `project` is the legacy alias of `project_id` wherever a project is named. Any `user_id` a client
//! sends is not a field here and is ignored: identity comes only from the token.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// The kinds of note; anything else is 400.
pub const MEM_TYPES: [&str; 5] = ["note", "decision", "preference", "fact", "task"];

/// A stored note (spec §2.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryNote {
    /// `mem#<user>#<project>#<i>`; `i` counts from 1 per (user, project) and is never reused.
    pub id: String,
    pub project_id: String,
    pub note: String,
    /// Defaults to `user`.
    pub author: String,
    /// Unix time in seconds, with a millisecond fraction.
    pub created_at: f64,
    /// Always `false`; PATCH accepts `pinned` and ignores it.
    pub pinned: bool,
    /// One of `note`, `decision`, `preference`, `fact`, `task`.
    pub mem_type: String,
}

/// `POST /v1/memory/remember`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RememberRequest {
    /// Trimmed; 1 byte to 16 KiB. A note equal to one already in the project (whitespace folded) is not stored twice.
    pub note: String,
    /// 1 to 128 characters of `[A-Za-z0-9._-]`.
    #[serde(default)]
    pub project_id: Option<String>,
    /// Legacy alias of `project_id`.
    #[serde(default)]
    pub project: Option<String>,
    /// At most 64 characters; default `user`.
    #[serde(default)]
    pub author: Option<String>,
    /// Default `note`.
    #[serde(default)]
    pub mem_type: Option<String>,
}

/// A project named by `project_id` or its alias `project` (query string or JSON body).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProjectSelector {
    #[serde(default)]
    pub project_id: Option<String>,
    /// Legacy alias of `project_id`.
    #[serde(default)]
    pub project: Option<String>,
}

/// `GET`/`POST /v1/memory/recall`: the project's notes, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RecallResponse {
    pub notes: Vec<String>,
}

/// `GET /v1/memory/list` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Without it, notes of every project of the caller.
    #[serde(default)]
    pub project_id: Option<String>,
    /// Legacy alias of `project_id`.
    #[serde(default)]
    pub project: Option<String>,
    /// Default 50; above 200 is clamped to 200; negative is 400.
    #[serde(default)]
    pub limit: Option<i64>,
    /// Default 0; negative is 400.
    #[serde(default)]
    pub offset: Option<i64>,
}

/// `GET /v1/memory/list`: oldest first, ties by id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ListResponse {
    pub total: u64,
    pub items: Vec<MemoryNote>,
}

/// `POST /v1/memory/delete`: exactly one selector is used, by priority `id`, then `project_id`, then `all`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct DeleteRequest {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub project_id: Option<String>,
    /// Legacy alias of `project_id`.
    #[serde(default)]
    pub project: Option<String>,
    /// `true` runs the GDPR cascade: every note of the caller, in every project.
    #[serde(default)]
    pub all: Option<bool>,
}

/// The answer of every delete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeleteResponse {
    pub ok: bool,
    pub deleted: u64,
}

/// `PATCH /v1/memory/{id}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct PatchRequest {
    /// New note text; the note-text rules apply.
    #[serde(default)]
    pub content: Option<String>,
    /// The same as `content`, named as every other memory call names a note's text (issue 42);
    /// `content` wins when both are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Accepted and ignored.
    #[serde(default)]
    pub pinned: Option<bool>,
}

/// The answer of `POST /v1/memory/remember`: `{ok: true, id}`, the stored note's id (the
/// existing note's when an equal one was already there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RememberResponse {
    pub ok: bool,
    pub id: String,
}

/// The answer of `PATCH /v1/memory/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PatchResponse {
    pub ok: bool,
    pub item: MemoryNote,
}
