//! The one table of machine codes and the error body every non-2xx JSON answer carries.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A stable machine code. Each has exactly one HTTP status (CONTRACT.md, Machine codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidRequest,
    UnknownModel,
    Unauthorized,
    InvalidCredentials,
    Forbidden,
    QuotaExceeded,
    /// The account's monthly token or spend budget is used up.
    BudgetExceeded,
    /// The account may not use the model it named (`allowed_models`).
    ModelNotAllowed,
    SignupClosed,
    NotFound,
    MethodNotAllowed,
    EmailTaken,
    LastAdmin,
    /// The request body did not arrive within `[server] body_timeout_ms`.
    RequestTimeout,
    PayloadTooLarge,
    UnsupportedMediaType,
    RateLimited,
    Internal,
    UpstreamError,
    UpstreamEventTooLarge,
    StoreUnavailable,
    ProviderUnavailable,
    SearchUnavailable,
}

impl ErrorCode {
    /// Every code, for documentation and tests.
    pub const ALL: [ErrorCode; 23] = [
        Self::InvalidRequest,
        Self::UnknownModel,
        Self::Unauthorized,
        Self::InvalidCredentials,
        Self::Forbidden,
        Self::QuotaExceeded,
        Self::BudgetExceeded,
        Self::ModelNotAllowed,
        Self::SignupClosed,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::EmailTaken,
        Self::LastAdmin,
        Self::RequestTimeout,
        Self::PayloadTooLarge,
        Self::UnsupportedMediaType,
        Self::RateLimited,
        Self::Internal,
        Self::UpstreamError,
        Self::UpstreamEventTooLarge,
        Self::StoreUnavailable,
        Self::ProviderUnavailable,
        Self::SearchUnavailable,
    ];

    /// The HTTP status this code is always sent with.
    pub const fn status(self) -> u16 {
        match self {
            Self::InvalidRequest | Self::UnknownModel => 400,
            Self::Unauthorized | Self::InvalidCredentials => 401,
            Self::Forbidden
            | Self::QuotaExceeded
            | Self::BudgetExceeded
            | Self::ModelNotAllowed
            | Self::SignupClosed => 403,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::EmailTaken | Self::LastAdmin => 409,
            Self::RequestTimeout => 408,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::RateLimited => 429,
            Self::Internal => 500,
            Self::UpstreamError | Self::UpstreamEventTooLarge => 502,
            Self::StoreUnavailable | Self::ProviderUnavailable | Self::SearchUnavailable => 503,
        }
    }

    /// The code as it appears on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::UnknownModel => "unknown_model",
            Self::Unauthorized => "unauthorized",
            Self::InvalidCredentials => "invalid_credentials",
            Self::Forbidden => "forbidden",
            Self::QuotaExceeded => "quota_exceeded",
            Self::BudgetExceeded => "budget_exceeded",
            Self::ModelNotAllowed => "model_not_allowed",
            Self::SignupClosed => "signup_closed",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::EmailTaken => "email_taken",
            Self::LastAdmin => "last_admin",
            Self::RequestTimeout => "request_timeout",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::RateLimited => "rate_limited",
            Self::Internal => "internal",
            Self::UpstreamError => "upstream_error",
            Self::UpstreamEventTooLarge => "upstream_event_too_large",
            Self::StoreUnavailable => "store_unavailable",
            Self::ProviderUnavailable => "provider_unavailable",
            Self::SearchUnavailable => "search_unavailable",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `{error, message}`: the body of every error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorCode,
    /// Human text; never a stack trace, SQL text, key or password.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_name_matches_serde_name_for_every_code() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap_or_default();
            assert_eq!(json, serde_json::Value::String(code.as_str().to_owned()));
        }
    }

    #[test]
    fn statuses_follow_the_contract_table() {
        assert_eq!(ErrorCode::EmailTaken.status(), 409);
        assert_eq!(ErrorCode::RateLimited.status(), 429);
        assert_eq!(ErrorCode::UpstreamError.status(), 502);
        assert_eq!(ErrorCode::SearchUnavailable.status(), 503);
        assert_eq!(ErrorCode::SignupClosed.status(), 403);
        assert_eq!(ErrorCode::UnsupportedMediaType.status(), 415);
    }
}
