//! The client's one error type: an answer of the relay that is not a success carries its machine
//! code and message unchanged, so callers can branch on the code (`quota_exceeded`, `unauthorized`).

use relay_wire::ErrorCode;

/// What can go wrong talking to a relay.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The relay answered with a non-2xx status and its `{error, message}` body.
    #[error("{message} ({code}, HTTP {status})")]
    Api {
        status: u16,
        /// The machine code as sent; a code newer than this client is kept as text.
        code: String,
        message: String,
    },
    /// The relay could not be reached, or the connection broke.
    #[error("cannot reach the relay: {0}")]
    Transport(#[from] reqwest::Error),
    /// The relay sent something that is not the wire format.
    #[error("unexpected answer from the relay: {0}")]
    Decode(String),
    /// A leg's stream ended without a terminal event (`tool_calls`, `done` or `error`).
    #[error("the relay closed the stream before the leg ended")]
    Truncated,
    /// The base URL given to the client is not a URL.
    #[error("invalid relay URL `{0}`")]
    BadUrl(String),
}

impl Error {
    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The machine code of an API error, when this client knows it.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Api { code, .. } => {
                serde_json::from_value(serde_json::Value::String(code.clone())).ok()
            }
            _ => None,
        }
    }
}
