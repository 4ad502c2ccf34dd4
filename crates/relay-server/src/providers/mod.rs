//! Model providers behind one trait: a normalised request in, a normalised event stream out.
//!
//! Each provider's wire format stays inside its own module (`openai` also serves every
//! OpenAI-compatible server); what leaves a module is only the types below. The rule every
//! adapter keeps: a key goes into a request header and nowhere else, and an error says what
//! kind of failure happened (a status, a short machine code) and repeats the provider's own
//! message only as `sanitise` leaves it (no credential, account id or query string).

pub mod anthropic;
pub mod demo;
pub mod gemini;
pub mod openai;
pub mod openai_responses;
pub mod outgoing;
pub mod passthrough;
pub mod registry;
pub mod sanitise;
pub mod sse;
pub mod transport;
pub mod whole;

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use sse::EventNormaliser;

/// A provider-agnostic chat request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The provider's own model name (config `upstream`).
    pub model: String,
    /// The client's joined system text (the notes are `notes`, placed after it).
    pub system: Option<String>,
    /// The injected notes block, byte-identical across one conversation's legs; adapters put
    /// it after the client's system prompt so the client's cached prefix stays intact.
    pub notes: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    /// Sequences that end the answer; the Responses API has no such field, so it drops them.
    pub stop: Vec<String>,
    /// How the model may use `tools`; `None` leaves the provider's default (the model decides).
    /// Adapters send it only alongside tools, since providers refuse a choice among none.
    pub tool_choice: Option<ToolChoice>,
    /// The client's own request, for a provider of the same API family (`passthrough`).
    pub passthrough: Option<std::sync::Arc<passthrough::Passthrough>>,
    /// A stable key per user and conversation, sent as OpenAI's `prompt_cache_key` unless the
    /// client set its own.
    pub cache_key: Option<String>,
}

impl ChatRequest {
    /// The system text a translating adapter sends: the client's, then the notes block.
    pub fn system_text(&self) -> Option<String> {
        match (self.system.as_deref(), self.notes.as_deref()) {
            (Some(s), Some(n)) if !s.is_empty() => Some(format!("{s}\n\n{n}")),
            (_, Some(n)) => Some(n.to_owned()),
            (s, None) => s.map(str::to_owned),
        }
    }
}

/// The caller's say over tool use, which each adapter writes in its provider's own form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides whether to call a tool.
    Auto,
    /// No tool may be called (the tools still describe the calls in the history).
    None,
    /// Some tool must be called.
    Required,
    /// This tool must be called.
    Function(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatMessage {
    User {
        content: String,
    },
    Assistant {
        content: String,
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object.
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Complete JSON text; `"{}"` when the model sent no arguments.
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Prompt tokens written to the provider's prompt cache (Anthropic's
    /// `cache_creation_input_tokens`); part of `input_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Output tokens spent reasoning; part of `output_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Tools the provider ran itself for the call (web searches, fetches, code runs), billed
    /// apart from tokens: what the ledger meters of a call's hosted tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tool_uses: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    ContentFilter,
    ToolCalls,
}

impl FinishReason {
    /// The wire name used in Relay's `done` event.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
            Self::ToolCalls => "tool_calls",
        }
    }
}

/// What a provider stream yields, in order; `Finished` comes exactly once, last.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// A piece of the answer, as soon as it arrives.
    Text(String),
    /// Visible reasoning/thinking text where the provider streams it.
    Reasoning(String),
    /// The signature that closes the current thinking block (Anthropic's `signature_delta`).
    ReasoningSignature(String),
    /// A thinking block the provider sent encrypted (Anthropic's `redacted_thinking` data).
    RedactedReasoning(String),
    /// An OpenAI Responses reasoning item opening (id alone) or closing (with its encrypted
    /// content and summary parts), carried so the Responses door can give it back unchanged.
    ReasoningItem(relay_wire::agent::ReasoningItem),
    Finished {
        finish_reason: FinishReason,
        tool_calls: Vec<ToolCall>,
        usage: Usage,
    },
    /// The provider's count so far, before the finish (Anthropic's `message_start` carries the
    /// prompt's tokens): what a leg that ends early records instead of an estimate.
    UsageSoFar(Usage),
    /// One server-sent event exactly as the provider sent it, ahead of the events made from it;
    /// only when the request asked for them (`Passthrough::raw`, a client of the provider's
    /// own API family that streams).
    Raw(bytes::Bytes),
}

/// A provider failure. `Display` never includes a key, a URL or an upstream body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Could not reach the provider (DNS, refused, TLS, timeout before headers).
    #[error("could not reach the provider: {0}")]
    Connect(String),
    /// HTTP 429 (or a rate-limit error reported inside the stream). `code` and `detail` are the
    /// provider's error type/code and its own message, sanitised as for `Status`: a 429 is also
    /// how OpenAI says an account's credit is spent (`insufficient_quota`), which the user must
    /// see to know that waiting will not help (issue 42).
    #[error("{}{}", RateLimitedText(.code.as_deref(), .detail.as_deref()), RetryAfter(*.retry_after))]
    RateLimited {
        retry_after: Option<Duration>,
        code: Option<String>,
        detail: Option<String>,
    },
    /// Another non-2xx answer, or an error reported inside the stream. `message` is the
    /// provider's error type/code only, sanitized; `detail` the provider's own message as
    /// `sanitise::provider_message` leaves it (issue 42: the user sees why).
    #[error("the provider answered with status {status} ({message}){}", Detail(.detail.as_deref()))]
    Status {
        status: u16,
        message: String,
        detail: Option<String>,
    },
    /// A malformed stream: bad framing, invalid JSON, or an end without a finish.
    #[error("the provider's stream was malformed: {0}")]
    Protocol(String),
    /// One SSE line or event was larger than `[routing] max_event_bytes`; the stream was ended
    /// there and its buffer freed.
    #[error("the provider sent an event larger than {max} bytes (routing.max_event_bytes)")]
    EventTooLarge { max: usize },
    /// Reserved for the caller: the stream went quiet for too long.
    #[error("the provider stopped sending data")]
    IdleTimeout,
}

/// A byte stream that cannot fail (recorded bytes in tests and tools) drives an adapter too.
impl From<std::convert::Infallible> for ProviderError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

/// Renders ` (retry after Ns)` for the `RateLimited` message.
struct RetryAfter(Option<Duration>);

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(d) => write!(f, " (retry after {}s)", d.as_secs()),
            None => Ok(()),
        }
    }
}

/// The `RateLimited` message: the plain sentence when the provider said nothing more, else its
/// status, code and message in the shape `Status` uses.
struct RateLimitedText<'a>(Option<&'a str>, Option<&'a str>);

impl fmt::Display for RateLimitedText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (None, None) => f.write_str("the provider is rate limiting requests"),
            (code, detail) => write!(
                f,
                "the provider answered with status 429 ({}){}",
                code.unwrap_or("too_many_requests"),
                Detail(detail)
            ),
        }
    }
}

/// Renders `: <the provider's message>` for the `Status` message.
struct Detail<'a>(Option<&'a str>);

impl fmt::Display for Detail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(d) => write!(f, ": {d}"),
            None => Ok(()),
        }
    }
}

impl ProviderError {
    /// A short name for traces (`error.type`): which way the attempt failed, without its text.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Connect(_) => "connect",
            Self::RateLimited { .. } => "rate_limited",
            Self::Status { .. } => "status",
            Self::Protocol(_) => "protocol",
            Self::EventTooLarge { .. } => "event_too_large",
            Self::IdleTimeout => "idle_timeout",
        }
    }

    /// Whether the next model of a chain may be tried, provided no output was sent yet.
    pub fn retryable_before_output(&self) -> bool {
        match self {
            Self::Connect(_) | Self::RateLimited { .. } => true,
            Self::Status { status, .. } => *status >= 500 || *status == 408 || *status == 409,
            // A provider that goes quiet before saying anything is as good as unreachable.
            Self::IdleTimeout => true,
            // A broken or hostile stream; another try would most likely be the same.
            Self::Protocol(_) | Self::EventTooLarge { .. } => false,
        }
    }
}

pub type EventStream =
    Pin<Box<dyn futures::Stream<Item = Result<ProviderEvent, ProviderError>> + Send>>;

#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// "openai", "anthropic", "gemini" or "demo".
    fn kind(&self) -> &'static str;
    /// Sends the request; resolves once response headers arrived (Err for connect errors and
    /// non-2xx), then the stream yields events. Dropping the stream drops the upstream
    /// connection (cancellation).
    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError>;
    /// The provider's own token count for a Messages request body (`model` already the upstream
    /// name), for `POST /v1/messages/count_tokens`; `None` where the provider has no such endpoint.
    async fn count_tokens(&self, _body: serde_json::Value) -> Option<Result<u64, ProviderError>> {
        None
    }
}

/// A tool call being assembled from fragments.
#[derive(Debug, Clone, Default)]
pub(crate) struct DraftCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Closes a turn: empty arguments become `{}`, nameless calls are dropped, and a turn cut
/// short by the token limit loses the calls whose JSON never closed (they cannot be run).
/// Any call left makes the turn a `ToolCalls` turn whatever the provider said; a provider
/// saying `tool_calls` with no call left is a plain stop.
pub(crate) fn finish_turn(
    reason: FinishReason,
    drafts: Vec<DraftCall>,
    usage: Usage,
) -> ProviderEvent {
    let tool_calls: Vec<ToolCall> = drafts
        .into_iter()
        .filter(|d| !d.name.is_empty())
        .map(|d| {
            let arguments = if d.arguments.trim().is_empty() {
                "{}".to_owned()
            } else {
                d.arguments
            };
            ToolCall {
                id: d.id,
                name: d.name,
                arguments,
            }
        })
        .filter(|c| {
            reason != FinishReason::Length
                || serde_json::from_str::<serde::de::IgnoredAny>(&c.arguments).is_ok()
        })
        .collect();
    let finish_reason = if !tool_calls.is_empty() {
        FinishReason::ToolCalls
    } else if reason == FinishReason::ToolCalls {
        FinishReason::Stop
    } else {
        reason
    };
    ProviderEvent::Finished {
        finish_reason,
        tool_calls,
        usage,
    }
}

/// A provider error code fit to show: `[A-Za-z0-9_.-]{1,64}` that does not look like a secret.
/// Upstream bodies can echo the key (OpenAI's "Incorrect API key provided: sk-..."), so only a
/// short identifier survives, and one shaped like a key does not.
pub(crate) fn sanitize_code(code: &str) -> Option<String> {
    let shape_ok = !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !shape_ok {
        return None;
    }
    let lower = code.to_ascii_lowercase();
    const KEY_PREFIXES: [&str; 10] = [
        "sk-", "sk_", "aiza", "gsk_", "xai-", "rly_", "key-", "key_", "pk-", "api-",
    ];
    let digits = code.bytes().filter(u8::is_ascii_digit).count();
    let mixed_case = code.bytes().any(|b| b.is_ascii_lowercase())
        && code.bytes().any(|b| b.is_ascii_uppercase());
    // Error codes are words (`invalid_request_error`, `RESOURCE_EXHAUSTED`); keys are random.
    let looks_secret = KEY_PREFIXES.iter().any(|p| lower.starts_with(p))
        || digits >= 4
        || (mixed_case && digits > 0);
    (!looks_secret).then(|| code.to_owned())
}

/// Turns a provider's error JSON (`{"error": {...}}`, Anthropic's `{"type": "error", ...}`,
/// Gemini's `{"error": {"code", "status"}}`) into an error that names only its type/code.
/// `http_status` is the response status when the error came as an HTTP answer.
pub(crate) fn error_from_json(http_status: Option<u16>, body: &Value) -> ProviderError {
    let error = body.get("error").filter(|e| e.is_object()).unwrap_or(body);
    let field = |name: &str| {
        error
            .get(name)
            .and_then(Value::as_str)
            .and_then(sanitize_code)
    };
    let number = |name: &str| {
        error
            .get(name)
            .and_then(Value::as_u64)
            .and_then(|n| u16::try_from(n).ok())
    };
    // The most specific first: OpenAI's `code` ("invalid_api_key") refines its `type`.
    let code = field("code")
        .or_else(|| field("type"))
        .or_else(|| field("status"));
    let status = http_status
        .or_else(|| number("status_code"))
        .or_else(|| number("code"))
        .or_else(|| number("status"))
        .or_else(|| code.as_deref().and_then(anthropic_error_status))
        .filter(|s| (100..=599).contains(s))
        // An error reported mid-stream without a status is the upstream's own failure.
        .unwrap_or(500);
    // OpenAI, Anthropic and Gemini put the text in `error.message`; Ollama and llama.cpp
    // servers answer `{"error": "text"}`.
    let detail = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| body.get("error").and_then(Value::as_str))
        .and_then(sanitise::provider_message);
    if status == 429 {
        return ProviderError::RateLimited {
            retry_after: None,
            code,
            detail,
        };
    }
    let message = code.unwrap_or_else(|| {
        if http_status.is_some() {
            default_status_text(status)
        } else {
            "stream_error".to_owned()
        }
    });
    ProviderError::Status {
        status,
        message,
        detail,
    }
}

/// The error a non-2xx HTTP answer's body stands for: its JSON as `error_from_json` reads it,
/// or a body that is not JSON (a proxy's page, a plain-text error) as the message itself.
pub(crate) fn error_from_body(http_status: u16, body: &[u8]) -> ProviderError {
    if let Ok(json) = serde_json::from_slice::<Value>(body) {
        return error_from_json(Some(http_status), &json);
    }
    let mut error = error_from_json(Some(http_status), &Value::Null);
    if let ProviderError::Status { detail, .. } | ProviderError::RateLimited { detail, .. } =
        &mut error
    {
        *detail = sanitise::provider_message(&String::from_utf8_lossy(body));
    }
    error
}

/// Anthropic names its errors instead of numbering them when they arrive inside a stream.
fn anthropic_error_status(code: &str) -> Option<u16> {
    Some(match code {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "overloaded_error" => 529,
        _ => return None,
    })
}

fn default_status_text(status: u16) -> String {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(|r| r.to_ascii_lowercase().replace(' ', "_"))
        .unwrap_or_else(|| format!("http_{status}"))
}
