//! A typed async client for Relay's HTTP API, built on `relay-wire` and nothing of the server.
//!
//! Every endpoint a client uses has one method: accounts ([`Client::signup`], [`Client::signin`],
//! [`Client::signout`], [`Client::me`]), agent legs ([`Client::leg`], a [`LegStream`] of
//! [`AgentEvent`]s), the tool catalogue ([`Client::tools`]), project memory, suggestions and web
//! search. A non-2xx answer becomes [`Error::Api`] with the relay's machine code. Request bodies are
//! sent as `application/json`.
//!
//! ```no_run
//! use futures::StreamExt;
//! use relay_client::{Client, AgentEvent};
//! use relay_client::wire::agent::{AgentRequest, Content, Message, MessageRole};
//!
//! # async fn run() -> Result<(), relay_client::Error> {
//! let client = Client::new("http://127.0.0.1:7711")?.with_token(std::env::var("RELAY_TOKEN").ok());
//! let request = AgentRequest {
//!     messages: vec![Message {
//!         role: MessageRole::User,
//!         content: Some(Content::Text("Say hello".into())),
//!         tool_calls: None,
//!         tool_call_id: None,
//!     }],
//!     ..AgentRequest::default()
//! };
//! let mut leg = client.leg(&request).await?;
//! while let Some(event) = leg.next().await {
//!     if let AgentEvent::Text { text } = event? {
//!         print!("{text}");
//!     }
//! }
//! // Dropping `leg` early would cancel the leg: the relay stops the upstream call.
//! # Ok(()) }
//! ```
//!
//! `examples/hello.rs` is the same program, runnable: `cargo run -p relay-client --example hello`.

mod error;
mod stream;
mod usage;

pub use error::Error;
pub use relay_wire as wire;
pub use relay_wire::agent::AgentEvent;
pub use stream::LegStream;
pub use usage::{LegPage, LegRecord, ModelEntry, ModelList};

use relay_wire::OkResponse;
use relay_wire::account::{Credentials, Me, Session, WaitlistRequest};
use relay_wire::agent::AgentRequest;
use relay_wire::memory::{
    DeleteRequest, DeleteResponse, ListQuery, ListResponse, PatchRequest, PatchResponse,
    ProjectSelector, RecallResponse, RememberRequest,
};
use relay_wire::suggest::{SearchRequest, SearchResponse, SuggestRequest, SuggestResponse};
use relay_wire::tools::{ToolDef, ToolRole, ToolsResponse};
use reqwest::{Method, RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A connection to one relay, with or without a token (none in open mode).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client for the relay at `base` (e.g. `http://127.0.0.1:7711`), without a token.
    pub fn new(base: impl Into<String>) -> Result<Self, Error> {
        let base = base.into().trim_end_matches('/').to_owned();
        if reqwest::Url::parse(&base).is_err() {
            return Err(Error::BadUrl(base));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("relay-client/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            http,
            base,
            token: None,
        })
    }

    /// The same client presenting `token` as `Authorization: Bearer`.
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token;
        self
    }

    /// The relay's base URL, without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    async fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, Error> {
        let response = checked(request.send().await?).await?;
        let bytes = response.bytes().await?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode(e.to_string()))
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, Error> {
        // `.json()` sets `content-type: application/json`, which the relay requires of bodies.
        self.send(self.request(Method::POST, path).json(body)).await
    }

    /// `POST /v1/auth/signup`: creates an account and returns its first session.
    pub async fn signup(&self, email: &str, password: &str) -> Result<Session, Error> {
        self.post("/v1/auth/signup", &credentials(email, password))
            .await
    }

    /// `POST /v1/auth/signin`.
    pub async fn signin(&self, email: &str, password: &str) -> Result<Session, Error> {
        self.post("/v1/auth/signin", &credentials(email, password))
            .await
    }

    /// `POST /v1/auth/signout`: invalidates this client's token.
    pub async fn signout(&self) -> Result<(), Error> {
        let _: OkResponse = self
            .post("/v1/auth/signout", &serde_json::json!({}))
            .await?;
        Ok(())
    }

    /// `GET /v1/me`.
    pub async fn me(&self) -> Result<Me, Error> {
        self.send(self.request(Method::GET, "/v1/me")).await
    }

    /// `POST /v1/keys`: a new API key of the caller's, shown this once.
    pub async fn create_key(
        &self,
        name: &str,
        expires_in_days: Option<u32>,
    ) -> Result<relay_wire::signin::CreatedKey, Error> {
        let body = relay_wire::signin::NewKey {
            name: name.to_owned(),
            expires_in_days,
        };
        self.post("/v1/keys", &body).await
    }

    /// `GET /v1/keys`: the caller's API keys (never the keys themselves).
    pub async fn list_keys(&self) -> Result<relay_wire::signin::KeyList, Error> {
        self.send(self.request(Method::GET, "/v1/keys")).await
    }

    /// `DELETE /v1/keys/{id}`.
    pub async fn revoke_key(&self, id: &str) -> Result<(), Error> {
        let path = format!("/v1/keys/{}", encode_segment(id));
        let _: OkResponse = self.send(self.request(Method::DELETE, &path)).await?;
        Ok(())
    }

    /// `POST /v1/waitlist`.
    pub async fn waitlist(&self, email: &str, source: Option<&str>) -> Result<(), Error> {
        let body = WaitlistRequest {
            email: email.to_owned(),
            source: source.map(str::to_owned),
        };
        let _: OkResponse = self.post("/v1/waitlist", &body).await?;
        Ok(())
    }

    /// `GET /v1/tools`: the canonical tool definitions of `role` (spec §2.9).
    pub async fn tools(&self, role: Option<ToolRole>) -> Result<Vec<ToolDef>, Error> {
        let mut r = self.request(Method::GET, "/v1/tools");
        if let Some(role) = role {
            r = r.query(&[("tool_role", role_name(role))]);
        }
        let tools: ToolsResponse = self.send(r).await?;
        Ok(tools.tools)
    }

    /// `GET /v1/models`: the configured model names, `auto` first.
    pub async fn models(&self) -> Result<Vec<String>, Error> {
        let list: ModelList = self.send(self.request(Method::GET, "/v1/models")).await?;
        Ok(list.data.into_iter().map(|m| m.id).collect())
    }

    /// `GET /v1/usage/legs`: one page of the caller's ledger, newest first.
    pub async fn usage_legs(&self, limit: u32, cursor: Option<&str>) -> Result<LegPage, Error> {
        let mut r = self
            .request(Method::GET, "/v1/usage/legs")
            .query(&[("limit", limit.to_string())]);
        if let Some(c) = cursor {
            r = r.query(&[("cursor", c)]);
        }
        self.send(r).await
    }

    /// `POST /v1/agent/stream`: starts one leg. Errors before the stream (401, 403
    /// `quota_exceeded`, 429, …) are [`Error::Api`]; after it, an `error` event.
    pub async fn leg(&self, request: &AgentRequest) -> Result<LegStream, Error> {
        let response = self
            .request(Method::POST, "/v1/agent/stream")
            .json(request)
            .send()
            .await?;
        Ok(LegStream::new(checked(response).await?))
    }

    /// `POST /v1/memory/remember`.
    pub async fn remember(&self, request: &RememberRequest) -> Result<(), Error> {
        let _: OkResponse = self.post("/v1/memory/remember", request).await?;
        Ok(())
    }

    /// `POST /v1/memory/recall`: the project's notes, oldest first.
    pub async fn recall(&self, project_id: &str) -> Result<Vec<String>, Error> {
        let body = ProjectSelector {
            project_id: Some(project_id.to_owned()),
            project: None,
        };
        let r: RecallResponse = self.post("/v1/memory/recall", &body).await?;
        Ok(r.notes)
    }

    /// `GET /v1/memory/list`.
    pub async fn list_notes(&self, query: &ListQuery) -> Result<ListResponse, Error> {
        self.send(self.request(Method::GET, "/v1/memory/list").query(query))
            .await
    }

    /// `POST /v1/memory/delete` with one selector.
    pub async fn delete_notes(&self, request: &DeleteRequest) -> Result<DeleteResponse, Error> {
        self.post("/v1/memory/delete", request).await
    }

    /// `DELETE /v1/memory/{id}`.
    pub async fn delete_note(&self, id: &str) -> Result<DeleteResponse, Error> {
        let path = format!("/v1/memory/{}", encode_segment(id));
        self.send(self.request(Method::DELETE, &path)).await
    }

    /// `DELETE /v1/memory/all`: one project's notes, or with `None` every note of the caller.
    pub async fn delete_all(&self, project_id: Option<&str>) -> Result<DeleteResponse, Error> {
        let mut r = self.request(Method::DELETE, "/v1/memory/all");
        if let Some(p) = project_id {
            r = r.query(&[("project_id", p)]);
        }
        self.send(r).await
    }

    /// `PATCH /v1/memory/{id}`.
    pub async fn patch_note(&self, id: &str, patch: &PatchRequest) -> Result<PatchResponse, Error> {
        let path = format!("/v1/memory/{}", encode_segment(id));
        self.send(self.request(Method::PATCH, &path).json(patch))
            .await
    }

    /// `POST /v1/suggest`.
    pub async fn suggest(&self, request: &SuggestRequest) -> Result<SuggestResponse, Error> {
        self.post("/v1/suggest", request).await
    }

    /// `POST /v1/search`.
    pub async fn search(&self, query: &str, limit: Option<i64>) -> Result<SearchResponse, Error> {
        let body = SearchRequest {
            query: query.to_owned(),
            limit,
        };
        self.post("/v1/search", &body).await
    }
}

fn credentials(email: &str, password: &str) -> Credentials {
    Credentials {
        email: email.to_owned(),
        password: password.to_owned(),
    }
}

/// The wire name of a role, as `GET /v1/tools?tool_role=` takes it.
pub fn role_name(role: ToolRole) -> &'static str {
    match role {
        ToolRole::Worker => "worker",
        ToolRole::Orchestrator => "orchestrator",
        ToolRole::AgentOrchestrator => "agent_orchestrator",
    }
}

/// Percent-encodes a path segment (note ids contain `#`).
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The response when 2xx, else its `{error, message}` as [`Error::Api`].
async fn checked(response: Response) -> Result<Response, Error> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let bytes = response.bytes().await.unwrap_or_default();
    // Read loosely rather than as `ErrorBody`, so a code newer than this client is kept.
    let (code, message) = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v) => (
            v.get("error")
                .and_then(|c| c.as_str())
                .unwrap_or("unknown")
                .to_owned(),
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
                .unwrap_or_else(|| status.to_string()),
        ),
        Err(_) => ("unknown".to_owned(), status.to_string()),
    };
    Err(Error::Api {
        status: status.as_u16(),
        code,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn note_ids_are_encoded_for_paths() {
        assert_eq!(encode_segment("mem#u_1#p#3"), "mem%23u_1%23p%233");
    }

    #[test]
    fn a_bad_base_url_is_refused() {
        assert!(matches!(Client::new("not a url"), Err(Error::BadUrl(_))));
    }
}
