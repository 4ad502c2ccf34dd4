//! The Responses API's tools offered to providers that only know functions: `function` tools as
//! they are, `namespace` tools flattened to `{namespace}__{name}` functions, `custom` (freeform)
//! tools as a function of one string argument `input`; hosted tools (`web_search`, `file_search`,
//! `code_interpreter`, `image_generation`, `computer_use_preview`, `mcp`, `local_shell`...) are left
//! out, since only OpenAI can run them. The `Names` table maps a provider's call back exactly.

use std::collections::HashMap;

use relay_wire::tools::ToolDef;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::providers::ToolChoice;

/// Joins a namespace and a tool's name into one function name (the `openai_responses`
/// normaliser names a provider's namespaced calls the same way).
pub use crate::providers::openai_responses::NAMESPACE_SEPARATOR;

/// What a function name offered to the provider stands for in the client's tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Function,
    /// A namespace's sub-tool; `custom` when it is a freeform one.
    Namespaced {
        namespace: String,
        name: String,
        custom: bool,
    },
    Custom,
}

/// Offered function name → the client's tool.
#[derive(Debug, Default, Clone)]
pub struct Names(HashMap<String, Origin>);

impl Names {
    /// What a provider's call to `flat` stands for (an unknown name is a plain function).
    pub fn origin(&self, flat: &str) -> Origin {
        self.0.get(flat).cloned().unwrap_or(Origin::Function)
    }

    /// The function name a client's call is sent upstream under.
    pub fn flat(namespace: Option<&str>, name: &str) -> String {
        crate::providers::openai_responses::flat_name(namespace, name)
    }
}

fn bad(at: &str, what: &str) -> ApiError {
    ApiError::invalid(format!("{at}: {what}"))
}

fn function(tool: &Value, name: String, at: &str) -> Result<ToolDef, ApiError> {
    let parameters = match tool.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(p) if p.is_object() => p.clone(),
        Some(_) => return Err(bad(at, "parameters must be a JSON Schema object")),
    };
    Ok(ToolDef {
        name,
        description: description(tool),
        parameters,
    })
}

fn description(tool: &Value) -> String {
    tool["description"].as_str().unwrap_or_default().to_owned()
}

/// A freeform tool as a function taking its text as `input`; the grammar, when there is one,
/// goes into the argument's description so the model still sees it.
fn custom(tool: &Value, name: String) -> ToolDef {
    let mut input =
        json!({"type": "string", "description": "The tool's whole input, as free text."});
    if let Some(definition) = tool["format"]["definition"].as_str() {
        input["description"] = Value::String(format!(
            "The tool's whole input, as free text in this {} grammar:\n{definition}",
            tool["format"]["syntax"].as_str().unwrap_or("")
        ));
    }
    ToolDef {
        name,
        description: description(tool),
        parameters: json!({"type": "object", "properties": {"input": input}, "required": ["input"]}),
    }
}

fn name_of<'a>(tool: &'a Value, at: &str) -> Result<&'a str, ApiError> {
    tool["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad(&format!("{at}.name"), "a name is required"))
}

/// The name a tool is offered under keeps the rule every route holds tool names to (a native
/// leg's, Chat's and Messages': `[A-Za-z0-9_-]{1,64}`), so no door forwards one a provider or the
/// next leg would refuse (issue 38).
fn checked(name: String, at: &str) -> Result<String, ApiError> {
    if crate::legs::valid_tool_name(&name) {
        Ok(name)
    } else {
        Err(bad(
            &format!("{at}.name"),
            "must be 1 to 64 letters, digits, '_' or '-' (a namespace's tools: with the namespace and `__`)",
        ))
    }
}

/// The client's tools as functions, and the table that maps calls back.
pub fn offer(tools: &[Value]) -> Result<(Vec<ToolDef>, Names), ApiError> {
    let mut defs = Vec::new();
    let mut names = Names::default();
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        match tool["type"].as_str() {
            Some("function") => {
                let name = name_of(tool, &at)?;
                defs.push(function(tool, checked(name.to_owned(), &at)?, &at)?);
                names.0.insert(name.to_owned(), Origin::Function);
            }
            Some("custom") => {
                let name = name_of(tool, &at)?;
                defs.push(custom(tool, checked(name.to_owned(), &at)?));
                names.0.insert(name.to_owned(), Origin::Custom);
            }
            Some("namespace") => {
                let namespace = name_of(tool, &at)?;
                let inner = tool["tools"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                for (j, sub) in inner.iter().enumerate() {
                    let at = format!("{at}.tools[{j}]");
                    let name = name_of(sub, &at)?;
                    let flat = checked(Names::flat(Some(namespace), name), &at)?;
                    let is_custom = sub["type"] == "custom";
                    if is_custom {
                        defs.push(custom(sub, flat.clone()));
                    } else {
                        defs.push(function(sub, flat.clone(), &at)?);
                    }
                    names.0.insert(
                        flat,
                        Origin::Namespaced {
                            namespace: namespace.to_owned(),
                            name: name.to_owned(),
                            custom: is_custom,
                        },
                    );
                }
            }
            Some(_) => {} // a hosted tool: only OpenAI runs those
            None => return Err(bad(&format!("{at}.type"), "a tool needs a type")),
        }
    }
    Ok((defs, names))
}

/// `tool_choice`: `auto`, `none`, `required`, or `{type: "function" | "custom", name}`; a hosted
/// tool's choice (which no function stands for) is `auto`.
pub fn choice(value: &Value) -> Result<ToolChoice, ApiError> {
    match (
        value.as_str(),
        value["type"].as_str(),
        value["name"].as_str(),
    ) {
        (Some("auto"), ..) => Ok(ToolChoice::Auto),
        (Some("none"), ..) => Ok(ToolChoice::None),
        (Some("required"), ..) => Ok(ToolChoice::Required),
        (None, Some("function" | "custom"), Some(name)) => Ok(ToolChoice::Function(Names::flat(
            value["namespace"].as_str(),
            name,
        ))),
        (None, Some(_), _) => Ok(ToolChoice::Auto),
        _ => Err(ApiError::invalid(
            "tool_choice must be auto, none, required or {type: \"function\", name}",
        )),
    }
}

/// A custom tool's text from the function arguments it was called with.
pub fn custom_input(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|v| v["input"].as_str().map(str::to_owned))
        .unwrap_or_else(|| arguments.to_owned())
}
