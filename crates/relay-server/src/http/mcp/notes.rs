//! The four notes tools (`remember`, `recall`, `search_notes`, `forget`) as an rmcp
//! `ServerHandler`. Each call reads its caller and project from the `Connection` the gate put in
//! the request, so a model's arguments never choose either; the descriptions tell a model when to
//! use the tools without being asked.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::Connection;
use crate::domain::{Author, MemType, NoteId, NoteText};
use crate::store::{InjectBudget, NewNote};

/// The tools' names, as `tools/list` answers them.
pub const TOOL_NAMES: [&str; 4] = ["remember", "recall", "search_notes", "forget"];

/// `search_notes` answers at most this many notes, and this many when `limit` is not given.
const SEARCH_MAX: u64 = 50;
const SEARCH_DEFAULT: u64 = 8;

const INSTRUCTIONS: &str = "Relay keeps notes about the current project that every coding agent \
    the user runs (Claude Code, Codex, Relay's own) shares, and injects the relevant ones into later \
    conversations. Use `remember` for durable facts worth knowing next time (how to build and test, \
    conventions, decisions, pitfalls); `recall` or `search_notes` before work that earlier notes may \
    inform; `forget` for a note that is wrong or outdated.";

/// The handler; stateless, one per MCP session.
#[derive(Clone, Copy)]
pub struct Notes;

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "remember",
            "Save a durable fact about this project to the shared project memory, so that later \
             sessions (yours and other agents') know it: how to build, test and run it, its \
             conventions, decisions and their reasons, pitfalls found. Call it unprompted whenever \
             you learn something a teammate would want written down. One self-contained fact per \
             note; never secrets. Answers the new note's id.",
            schema(json!({
                "type": "object",
                "properties": {"note": {"type": "string", "description": "The fact, one or two sentences (at most 16 KiB)"}},
                "required": ["note"],
                "additionalProperties": false
            })),
        )
        .with_annotations(ToolAnnotations::new().read_only(false).destructive(false)),
        Tool::new(
            "recall",
            "List every note saved about this project, oldest first: what the user and earlier \
             agent sessions recorded (build and test commands, conventions, decisions). Use it at \
             the start of a task to pick up that context.",
            schema(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "search_notes",
            "Find this project's saved notes most relevant to a query (ranked as Relay ranks the \
             notes it injects), each with its id. Use it before work an earlier note may inform, \
             or to find the id of a note to forget.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you are looking for"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX, "description": "Most notes to answer (default 8)"}
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "forget",
            "Delete one of this project's notes by id (from search_notes) when it is wrong or \
             outdated; save the corrected fact with remember.",
            schema(json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The note's id"}},
                "required": ["id"],
                "additionalProperties": false
            })),
        )
        .with_annotations(ToolAnnotations::new().read_only(false).destructive(true)),
    ]
}

impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("relay", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let connection = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Connection>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("no connection", None))?;
        let project = connection
            .project
            .clone()
            .map_err(|why| ErrorData::invalid_params(why, None))?;
        let args = request.arguments.unwrap_or_default();
        let memory = connection.state.memory();
        let user = connection.caller.user_id();
        let result = match request.name.as_ref() {
            "remember" => {
                let text = match NoteText::parse(string_arg(&args, "note")?, "note") {
                    Ok(t) => t,
                    Err(e) => return Ok(CallToolResult::error(vec![ContentBlock::text(e)]).into()),
                };
                let author = author(context.client_info().map(|i| i.name), &connection);
                let remembered = memory
                    .remember(NewNote {
                        user_id: user.to_owned(),
                        project_id: project.clone(),
                        text,
                        author,
                        mem_type: MemType::default(),
                        created_at: (crate::clock::now() * 1000.0).round() / 1000.0,
                    })
                    .await
                    .map_err(store_error)?;
                let id = remembered.id.into_string();
                let line = if remembered.created {
                    format!("Saved as {id}.")
                } else {
                    format!("An equal note was already saved as {id}.")
                };
                structured(line, json!({"id": id, "created": remembered.created}))
            }
            "recall" => {
                let limit = connection.state.config().memory.recall_limit;
                let notes = memory
                    .recall(user, project.as_str(), limit)
                    .await
                    .map_err(store_error)?;
                let text = if notes.is_empty() {
                    "No notes are saved for this project yet.".to_owned()
                } else {
                    notes
                        .iter()
                        .map(|n| format!("- {n}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                structured(text, json!({"notes": notes}))
            }
            "search_notes" => {
                let query = string_arg(&args, "query")?;
                let limit = match args.get("limit") {
                    None | Some(Value::Null) => SEARCH_DEFAULT,
                    Some(v) => v
                        .as_u64()
                        .filter(|n| (1..=SEARCH_MAX).contains(n))
                        .ok_or_else(|| {
                            ErrorData::invalid_params(
                                format!("limit must be an integer from 1 to {SEARCH_MAX}"),
                                None,
                            )
                        })?,
                };
                let budget = InjectBudget {
                    max_notes: usize::try_from(limit).unwrap_or(8),
                    max_chars: connection.state.config().memory.inject_max_chars as usize,
                };
                let notes = memory
                    .notes_for_injection(user, project.as_str(), query, budget)
                    .await
                    .map_err(store_error)?;
                let text = if notes.is_empty() {
                    "No saved note matches.".to_owned()
                } else {
                    notes
                        .iter()
                        .map(|n| format!("- [{}] {}", n.id.as_str(), n.note))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let items: Vec<Value> = notes
                    .iter()
                    .map(|n| json!({"id": n.id.as_str(), "note": n.note, "author": n.author.as_str(), "created_at": n.created_at}))
                    .collect();
                structured(text, json!({"notes": items}))
            }
            "forget" => {
                let raw = string_arg(&args, "id")?;
                // Only a note of this connection's project: a model in one repository cannot
                // delete another project's notes by guessing ids.
                let deleted = match NoteId::parse(raw) {
                    Some(id) => match memory.get_note(user, &id).await.map_err(store_error)? {
                        Some(note) if note.project_id == project.as_str() => {
                            memory.delete_note(user, &id).await.map_err(store_error)?
                        }
                        _ => 0,
                    },
                    None => 0,
                };
                if deleted == 0 {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                        "No note {raw} in this project."
                    ))])
                    .into());
                }
                structured(format!("Deleted {raw}."), json!({"deleted": deleted}))
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "no tool named {other}; the tools are {}",
                        TOOL_NAMES.join(", ")
                    ),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

fn structured(text: String, value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

fn string_arg<'a>(args: &'a JsonObject, name: &str) -> Result<&'a str, ErrorData> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params(format!("`{name}` (a string) is required"), None))
}

fn store_error(e: crate::store::StoreError) -> ErrorData {
    tracing::warn!(error = %e, "memory store failed under /mcp");
    ErrorData::internal_error("the memory store is unavailable; try again", None)
}

/// The note's author: the MCP client's name (`claude-code` and `codex` by their usual names),
/// else what its User-Agent says, else `mcp`.
fn author(client_name: Option<String>, connection: &Connection) -> Author {
    let named = |raw: &str| -> Option<&'static str> {
        let raw = raw.to_ascii_lowercase();
        if raw.contains("claude") {
            Some("claude-code")
        } else if raw.contains("codex") {
            Some("codex")
        } else {
            None
        }
    };
    let chosen = match client_name.filter(|n| !n.trim().is_empty()) {
        Some(name) => named(&name).map_or(name, str::to_owned),
        None => connection
            .user_agent
            .as_deref()
            .and_then(named)
            .unwrap_or("mcp")
            .to_owned(),
    };
    Author::parse(Some(&chosen)).unwrap_or_else(|_| Author::parse(Some("mcp")).unwrap_or_default())
}
