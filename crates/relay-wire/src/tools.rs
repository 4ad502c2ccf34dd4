//! The client-executed tool catalogue (spec §2.8) and its role gating (§2.9).
//!
//! The eight tool rules of §2.8 are written into the descriptions the model reads. Relay never runs
//! these tools; it only decides which definitions reach the model.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

/// A tool definition (spec §2.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolDef {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// A JSON Schema object describing the arguments.
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
}

fn empty_object_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

/// Which agent is asking; it decides the tools it gets (spec §2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolRole {
    /// Base tools plus project memory.
    Worker,
    /// The CLI orchestrator: base plus panes and memory.
    Orchestrator,
    /// The in-app agent orchestrator: base minus file writes, plus agents, panes and memory.
    AgentOrchestrator,
}

/// `GET /v1/tools`: the canonical catalogue for one role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolsResponse {
    pub tools: Vec<ToolDef>,
}

/// The base tools every role starts from.
pub const BASE_TOOLS: [&str; 10] = [
    "read_file",
    "list_dir",
    "grep",
    "find_files",
    "write_file",
    "edit_file",
    "run_command",
    "web_search",
    "write_plan",
    "create_pdf",
];

/// The names a role may use, in catalogue order. `None` is the normal (null) role.
pub fn allowed_names(role: Option<ToolRole>) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = BASE_TOOLS.to_vec();
    match role {
        None => {}
        Some(ToolRole::Worker) => names.extend(["remember", "recall"]),
        Some(ToolRole::Orchestrator) => {
            names.extend([
                "remember",
                "recall",
                "open_pane",
                "send_keys",
                "read_pane",
                "list_panes",
            ]);
        }
        Some(ToolRole::AgentOrchestrator) => {
            names.retain(|n| *n != "write_file" && *n != "edit_file");
            names.extend([
                "remember",
                "recall",
                "spawn_agent",
                "send_agent",
                "read_agent",
                "list_panes",
            ]);
        }
    }
    let order: Vec<&str> = CATALOGUE_ORDER.to_vec();
    names.sort_by_key(|n| order.iter().position(|o| o == n));
    names
}

const CATALOGUE_ORDER: [&str; 19] = [
    "read_file",
    "list_dir",
    "grep",
    "find_files",
    "write_file",
    "edit_file",
    "run_command",
    "web_search",
    "write_plan",
    "create_pdf",
    "remember",
    "recall",
    "open_pane",
    "spawn_agent",
    "send_keys",
    "send_agent",
    "read_pane",
    "read_agent",
    "list_panes",
];

/// Whether `name` is a catalogue tool (and so gated and canonicalised).
pub fn is_catalogue_tool(name: &str) -> bool {
    CATALOGUE_ORDER.contains(&name)
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn integer(description: &str) -> Value {
    json!({"type": "integer", "description": description})
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn layout() -> Value {
    json!({
        "type": "string",
        "enum": ["right", "down", "tab"],
        "description": "Where the pane opens: right, down, or a new tab. Unknown values are treated as tab."
    })
}

/// The canonical definition of a catalogue tool.
pub fn definition(name: &str) -> Option<ToolDef> {
    let (description, parameters) = match name {
        "read_file" => (
            "Read a text file of the project. Large files are read in parts: when the read is truncated, \
             the result says so and reports the offset to resume from; call again with that offset.",
            object(
                json!({
                    "path": string("Path of the file, relative to the project root."),
                    "offset": integer("Line to start from (0-based); use the offset a truncated read reported."),
                    "limit": integer("How many lines to read at most."),
                }),
                &["path"],
            ),
        ),
        "list_dir" => (
            "List the entries of a directory of the project.",
            object(
                json!({"path": string("Directory to list, relative to the project root; default '.'.")}),
                &[],
            ),
        ),
        "grep" => (
            "Search the contents of every file of the project for a regular expression. It is project-wide \
             and takes no path or directory argument.",
            object(
                json!({"pattern": string("Regular expression to search for.")}),
                &["pattern"],
            ),
        ),
        "find_files" => (
            "Find files of the project whose path matches a glob pattern. It is project-wide and takes no \
             path or directory argument.",
            object(
                json!({"pattern": string("Glob pattern, e.g. **/*.rs.")}),
                &["pattern"],
            ),
        ),
        "write_file" => (
            "Create or overwrite a file with the given content.",
            object(
                json!({"path": string("Path of the file to write."), "content": string("The complete new content.")}),
                &["path", "content"],
            ),
        ),
        "edit_file" => (
            "Replace text in a file. old_string must match the file exactly and be unique in it, unless \
             replace_all is true; include enough surrounding lines to make it unique.",
            object(
                json!({
                    "path": string("Path of the file to edit."),
                    "old_string": string("Exact text to replace; must occur exactly once unless replace_all."),
                    "new_string": string("Replacement text."),
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring a unique one."},
                }),
                &["path", "old_string", "new_string"],
            ),
        ),
        "run_command" => (
            "Run a shell command in the project directory. The result comes back as exit_code=N on the \
             first line, followed by the combined stdout and stderr.",
            object(
                json!({"command": string("The command line to run.")}),
                &["command"],
            ),
        ),
        "web_search" => (
            "Search the web and return titles, URLs and snippets.",
            object(json!({"query": string("What to search for.")}), &["query"]),
        ),
        "write_plan" => (
            "Write or replace the plan for the current task as a markdown document the user can read.",
            object(
                json!({"title": string("Title of the plan."), "markdown": string("The plan in markdown.")}),
                &["title", "markdown"],
            ),
        ),
        "create_pdf" => (
            "Render content to a PDF file. It uses the best local rendering engine available, with a \
             built-in renderer as the guaranteed floor, and reports which engine produced the file.",
            object(
                json!({
                    "content": string("The document content (markdown or plain text)."),
                    "output_path": string("Where to write the PDF."),
                    "title": string("Document title."),
                }),
                &["content", "output_path"],
            ),
        ),
        "remember" => (
            "Save a note to the project memory so later sessions know it. Give only the note: the project \
             is derived from the working directory, never passed as an argument.",
            object(json!({"note": string("The note to remember.")}), &["note"]),
        ),
        "recall" => (
            "Read the notes saved in the project memory. It takes no parameters: no project and no query; \
             the project is derived from the working directory.",
            object(json!({}), &[]),
        ),
        "open_pane" => (
            "Open a terminal pane running a CLI agent or a shell command.",
            object(
                json!({"layout": layout(), "command": string("Command to run in the pane; a shell when absent.")}),
                &["layout"],
            ),
        ),
        "spawn_agent" => (
            "Start an in-app agent worker on a task, in a new pane.",
            object(
                json!({
                    "layout": layout(),
                    "model": string("Model for the worker; the default model when absent."),
                    "task": string("What the worker should do."),
                }),
                &["layout", "task"],
            ),
        ),
        "send_keys" => (
            "Type text into a pane, as keystrokes.",
            object(
                json!({"pane": integer("Pane number."), "text": string("Text to type; end with a newline to submit.")}),
                &["pane", "text"],
            ),
        ),
        "send_agent" => (
            "Send a message to an agent worker's pane.",
            object(
                json!({"pane": integer("Pane number of the agent."), "text": string("The message.")}),
                &["pane", "text"],
            ),
        ),
        "read_pane" => (
            "Read the visible text of a pane.",
            object(json!({"pane": integer("Pane number.")}), &["pane"]),
        ),
        "read_agent" => (
            "Read the latest output of an agent worker.",
            object(
                json!({"pane": integer("Pane number of the agent.")}),
                &["pane"],
            ),
        ),
        "list_panes" => (
            "List the open panes with their numbers and what runs in them.",
            object(json!({}), &[]),
        ),
        _ => return None,
    };
    Some(ToolDef {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    })
}

/// The canonical catalogue of a role.
pub fn catalogue(role: Option<ToolRole>) -> Vec<ToolDef> {
    allowed_names(role)
        .into_iter()
        .filter_map(definition)
        .collect()
}

/// What the model is offered, from what the client sent: catalogue tools the role does not allow
/// are removed, allowed ones get the canonical definition, other tools pass through unchanged.
/// Nothing the client did not send is added; a tool sent twice goes once.
pub fn gate(role: Option<ToolRole>, sent: &[ToolDef]) -> Vec<ToolDef> {
    let allowed = allowed_names(role);
    let mut out: Vec<ToolDef> = Vec::with_capacity(sent.len());
    for tool in sent {
        if out.iter().any(|t| t.name == tool.name) {
            continue;
        }
        if is_catalogue_tool(&tool.name) {
            if allowed.contains(&tool.name.as_str())
                && let Some(def) = definition(&tool.name)
            {
                out.push(def);
            }
        } else {
            out.push(tool.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_get_the_spec_table() {
        assert_eq!(allowed_names(None), BASE_TOOLS.to_vec());
        let worker = allowed_names(Some(ToolRole::Worker));
        assert_eq!(worker.len(), 12);
        assert!(worker.contains(&"recall") && worker.contains(&"remember"));
        let cli = allowed_names(Some(ToolRole::Orchestrator));
        for t in [
            "open_pane",
            "send_keys",
            "read_pane",
            "list_panes",
            "recall",
            "remember",
            "write_file",
        ] {
            assert!(cli.contains(&t), "{t}");
        }
        assert!(!cli.contains(&"spawn_agent"));
        let agent = allowed_names(Some(ToolRole::AgentOrchestrator));
        for t in [
            "spawn_agent",
            "send_agent",
            "read_agent",
            "list_panes",
            "recall",
            "remember",
            "read_file",
        ] {
            assert!(agent.contains(&t), "{t}");
        }
        for t in ["write_file", "edit_file", "open_pane", "send_keys"] {
            assert!(!agent.contains(&t), "{t}");
        }
    }

    #[test]
    fn every_catalogue_tool_has_a_definition_and_layout_enums_are_present() {
        for name in CATALOGUE_ORDER {
            let def = definition(name).unwrap();
            assert_eq!(def.parameters["type"], "object");
            assert!(!def.description.is_empty());
        }
        for name in ["open_pane", "spawn_agent"] {
            let def = definition(name).unwrap();
            assert_eq!(
                def.parameters["properties"]["layout"]["enum"],
                json!(["right", "down", "tab"])
            );
            assert!(
                def.parameters["required"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("layout"))
            );
        }
        assert_eq!(
            definition("recall").unwrap().parameters["properties"],
            json!({})
        );
        assert_eq!(
            definition("remember").unwrap().parameters["required"],
            json!(["note"])
        );
    }

    #[test]
    fn gating_removes_canonicalises_and_passes_through() {
        let sent = vec![
            ToolDef {
                name: "write_file".into(),
                description: "mine".into(),
                parameters: json!({}),
            },
            ToolDef {
                name: "spawn_agent".into(),
                description: "x".into(),
                parameters: json!({}),
            },
            ToolDef {
                name: "my_tool".into(),
                description: "custom".into(),
                parameters: json!({"a": 1}),
            },
            ToolDef {
                name: "my_tool".into(),
                description: "dup".into(),
                parameters: json!({}),
            },
        ];
        let out = gate(None, &sent);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], definition("write_file").unwrap());
        assert_eq!(out[1], sent[2]);
        let out = gate(Some(ToolRole::AgentOrchestrator), &sent);
        let names: Vec<_> = out.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["spawn_agent", "my_tool"]);
        assert!(
            gate(Some(ToolRole::Worker), &[]).is_empty(),
            "never adds a tool"
        );
    }
}
