//! The 503 bodies of the memory endpoints: the usual success shape emptied, plus `error` and
//! `message` (spec §4.4 rule 4, CONTRACT.md Notes), e.g. `{"error": …, "message": …, "notes": []}`.
//!
//! Fields are declared in name order because that is the order these bodies have always been
//! sent in (they were built as sorted JSON maps); a client may compare them byte for byte.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ErrorCode;
use crate::memory::MemoryNote;

/// A success shape emptied, carrying the error that emptied it.
pub trait Emptied: Serialize {
    fn emptied(error: ErrorCode, message: String) -> Self;
}

/// 503 of `POST /v1/memory/remember` and `PATCH /v1/memory/{id}`: `ok` is `false`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OkEmptied {
    /// `store_unavailable`.
    pub error: ErrorCode,
    pub message: String,
    /// Always `false`.
    pub ok: bool,
}

/// 503 of `GET`/`POST /v1/memory/recall`: no notes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RecallEmptied {
    /// `store_unavailable`.
    pub error: ErrorCode,
    pub message: String,
    /// Always empty.
    pub notes: Vec<String>,
}

/// 503 of `GET /v1/memory/list`: no items, `total` 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ListEmptied {
    /// `store_unavailable`.
    pub error: ErrorCode,
    /// Always empty.
    pub items: Vec<MemoryNote>,
    pub message: String,
    /// Always 0.
    pub total: u64,
}

/// 503 of every delete: `ok` is `false`, `deleted` 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeleteEmptied {
    /// Always 0.
    pub deleted: u64,
    /// `store_unavailable`.
    pub error: ErrorCode,
    pub message: String,
    /// Always `false`.
    pub ok: bool,
}

impl Emptied for OkEmptied {
    fn emptied(error: ErrorCode, message: String) -> Self {
        Self {
            error,
            message,
            ok: false,
        }
    }
}

impl Emptied for RecallEmptied {
    fn emptied(error: ErrorCode, message: String) -> Self {
        Self {
            error,
            message,
            notes: Vec::new(),
        }
    }
}

impl Emptied for ListEmptied {
    fn emptied(error: ErrorCode, message: String) -> Self {
        Self {
            error,
            items: Vec::new(),
            message,
            total: 0,
        }
    }
}

impl Emptied for DeleteEmptied {
    fn emptied(error: ErrorCode, message: String) -> Self {
        Self {
            deleted: 0,
            error,
            message,
            ok: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire<T: Emptied>() -> String {
        serde_json::to_string(&T::emptied(ErrorCode::StoreUnavailable, "down".into())).unwrap()
    }

    #[test]
    fn each_shape_is_sent_as_before() {
        let e = r#""error":"store_unavailable","message":"down""#;
        assert_eq!(wire::<OkEmptied>(), format!(r#"{{{e},"ok":false}}"#));
        assert_eq!(wire::<RecallEmptied>(), format!(r#"{{{e},"notes":[]}}"#));
        assert_eq!(
            wire::<ListEmptied>(),
            r#"{"error":"store_unavailable","items":[],"message":"down","total":0}"#
        );
        assert_eq!(
            wire::<DeleteEmptied>(),
            r#"{"deleted":0,"error":"store_unavailable","message":"down","ok":false}"#
        );
    }
}
