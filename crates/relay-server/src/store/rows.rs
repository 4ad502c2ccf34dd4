//! Row mapping shared by every backend: one `sqlx::FromRow` struct per shape a query returns,
//! read by column name, so the SQL stays per dialect while the mapping is written once.

use super::{Note, StoreError, StoreResult, User};
use crate::domain::Role;
use crate::domain::{Author, MemType, NoteId};

/// The columns `UserRow` reads, spliced into queries at compile time.
macro_rules! user_columns {
    () => {
        "id, email, role, quota_limit, used, created_at, allowed_models"
    };
}
pub(crate) use user_columns;

/// The columns `NoteRow` reads, spliced into queries at compile time.
macro_rules! note_columns {
    () => {
        "id, project_id, note, author, mem_type, created_at"
    };
}
pub(crate) use note_columns;

/// An account row; the role is checked when it becomes a `User`.
#[derive(sqlx::FromRow)]
pub(crate) struct UserRow {
    id: String,
    email: String,
    role: String,
    quota_limit: i64,
    used: i64,
    created_at: f64,
    /// A JSON array of model names; NULL for every model.
    allowed_models: Option<String>,
}

impl TryFrom<UserRow> for User {
    type Error = StoreError;

    fn try_from(row: UserRow) -> StoreResult<Self> {
        Ok(Self {
            id: row.id,
            email: row.email,
            role: Role::parse(&row.role).map_err(StoreError::Internal)?,
            limit: row.quota_limit,
            used: row.used,
            created_at: row.created_at,
            allowed_models: row
                .allowed_models
                .map(|json| serde_json::from_str(&json))
                .transpose()
                .map_err(|e| StoreError::Internal(format!("an account's allowed_models: {e}")))?,
        })
    }
}

/// An account row and its password hash, for sign-in.
#[derive(sqlx::FromRow)]
pub(crate) struct UserWithHashRow {
    #[sqlx(flatten)]
    pub user: UserRow,
    pub password_hash: String,
}

/// An allowlist change as the column stores it: `Some(None)` and `None` both bind NULL (the
/// `CASE` decides whether it is written).
pub(crate) fn models_json(change: Option<&Option<Vec<String>>>) -> StoreResult<Option<String>> {
    match change {
        Some(Some(names)) => serde_json::to_string(names)
            .map(Some)
            .map_err(|e| StoreError::Internal(e.to_string())),
        _ => Ok(None),
    }
}

/// Maps an optional account row, as `fetch_optional` gives it.
pub(crate) fn user(row: Option<UserRow>) -> StoreResult<Option<User>> {
    row.map(User::try_from).transpose()
}

/// A session's account row and when the session expires.
#[derive(sqlx::FromRow)]
pub(crate) struct SessionRow {
    #[sqlx(flatten)]
    pub user: UserRow,
    pub expires_at: f64,
}

/// Maps an optional session row, as `fetch_optional` gives it.
pub(crate) fn session(row: Option<SessionRow>) -> StoreResult<Option<(User, f64)>> {
    row.map(|r| Ok((User::try_from(r.user)?, r.expires_at)))
        .transpose()
}

/// Maps account rows, as `fetch_all` gives them.
pub(crate) fn users(rows: Vec<UserRow>) -> StoreResult<Vec<User>> {
    rows.into_iter().map(User::try_from).collect()
}

/// A note row.
#[derive(sqlx::FromRow)]
pub(crate) struct NoteRow {
    id: String,
    project_id: String,
    note: String,
    author: String,
    mem_type: String,
    created_at: f64,
}

impl From<NoteRow> for Note {
    fn from(row: NoteRow) -> Self {
        Self {
            id: NoteId::from_stored(row.id),
            project_id: row.project_id,
            note: row.note,
            author: Author::from_stored(row.author),
            mem_type: MemType::from_stored(row.mem_type),
            created_at: row.created_at,
        }
    }
}

/// A note row with its relevance score, as the ranking queries return it.
#[derive(sqlx::FromRow)]
pub(crate) struct RankedRow {
    #[sqlx(flatten)]
    pub note: NoteRow,
    pub score: f64,
}

/// Maps note rows, as `fetch_all` gives them.
pub(crate) fn notes(rows: Vec<NoteRow>) -> Vec<Note> {
    rows.into_iter().map(Note::from).collect()
}

/// Maps ranked rows to (note, score) pairs.
pub(crate) fn ranked(rows: Vec<RankedRow>) -> Vec<(Note, f64)> {
    rows.into_iter().map(|r| (r.note.into(), r.score)).collect()
}

/// A pending device code as the verification page shows it.
#[derive(sqlx::FromRow)]
pub(crate) struct PendingDeviceRow {
    user_code: String,
    surface: String,
    user_agent: String,
    expires_at: f64,
}

impl From<PendingDeviceRow> for super::signin::PendingDevice {
    fn from(r: PendingDeviceRow) -> Self {
        Self {
            user_code: r.user_code,
            surface: r.surface,
            user_agent: r.user_agent,
            expires_at: r.expires_at,
        }
    }
}

/// What a poll reports for a device code that is not being exchanged now.
pub(crate) fn device_poll(
    status: &str,
    expires_at: f64,
    last_poll_at: Option<f64>,
    now: f64,
) -> super::signin::DevicePoll {
    use super::signin::DevicePoll;
    match status {
        "used" => DevicePoll::Unknown,
        _ if expires_at <= now => DevicePoll::Expired,
        "denied" => DevicePoll::Denied,
        _ => DevicePoll::Pending { last_poll_at },
    }
}

/// An API key with its owner's email.
#[derive(sqlx::FromRow)]
pub(crate) struct ApiKeyRow {
    id: String,
    user_id: String,
    email: String,
    name: String,
    prefix: String,
    created_at: f64,
    expires_at: Option<f64>,
    last_used_at: Option<f64>,
}

impl From<ApiKeyRow> for super::signin::ApiKey {
    fn from(r: ApiKeyRow) -> Self {
        Self {
            id: r.id,
            user_id: r.user_id,
            email: r.email,
            name: r.name,
            prefix: r.prefix,
            created_at: r.created_at,
            expires_at: r.expires_at,
            last_used_at: r.last_used_at,
        }
    }
}
