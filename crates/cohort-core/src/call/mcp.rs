//! A tool step's `instruction_content` (SPEC §8), typed: list the server's capabilities, or
//! call one tool, read one resource, or get one prompt.

use serde::Serialize;
use serde_json::{Map, Value};

/// One call to an MCP server.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum McpCall {
    /// The server's tools, resources (and templates) and prompts, with their schemas.
    Describe,
    /// Call one of the server's tools (`tool_name`).
    Tool {
        /// The tool's name.
        name: String,
        /// The tool's arguments; empty when the instruction gave none.
        arguments: Map<String, Value>,
    },
    /// Read one of the server's resources.
    Resource {
        /// The resource's URI (`arguments.uri`, or `uri` / `resource_uri`, or a `resource_name`
        /// that is a URI).
        uri: String,
    },
    /// Get one of the server's prompts (`prompt_name`), filled in with arguments.
    Prompt {
        /// The prompt's name.
        name: String,
        /// The prompt's arguments; empty when the instruction gave none.
        arguments: Map<String, Value>,
    },
}

impl McpCall {
    /// Reads `{"instruction_type": "get_description"}`, `{"tool_name", "arguments"}`,
    /// `{"resource_name", "arguments": {"uri"}}` or `{"prompt_name", "arguments"}`.
    pub fn from_instruction(v: &Value) -> Result<McpCall, InstructionError> {
        let o = v.as_object().ok_or(InstructionError::NotAnObject)?;
        let args = || -> Result<Map<String, Value>, InstructionError> {
            match o.get("arguments") {
                None | Some(Value::Null) => Ok(Map::new()),
                Some(Value::Object(m)) => Ok(m.clone()),
                Some(other) => Err(InstructionError::Arguments(other.to_string())),
            }
        };
        let text = |k: &str| {
            o.get(k)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        if text("instruction_type") == Some("get_description") {
            return Ok(McpCall::Describe);
        }
        if let Some(name) = text("tool_name") {
            return Ok(McpCall::Tool {
                name: name.to_owned(),
                arguments: args()?,
            });
        }
        if o.contains_key("resource_name")
            || o.contains_key("resource_uri")
            || o.contains_key("uri")
        {
            let a = args()?;
            let uri = a
                .get("uri")
                .or_else(|| o.get("uri"))
                .or_else(|| o.get("resource_uri"))
                .and_then(Value::as_str)
                .or(text("resource_name").filter(|n| n.contains("://")))
                .ok_or(InstructionError::NoUri)?;
            return Ok(McpCall::Resource {
                uri: uri.to_owned(),
            });
        }
        if let Some(name) = text("prompt_name") {
            return Ok(McpCall::Prompt {
                name: name.to_owned(),
                arguments: args()?,
            });
        }
        Err(InstructionError::NoCapability)
    }
}

/// Why a tool instruction names no call the runtime can make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstructionError {
    /// It is not a JSON object.
    NotAnObject,
    /// Its `arguments` are not an object (they are this JSON).
    Arguments(String),
    /// A resource read without a URI.
    NoUri,
    /// It names no tool, resource, prompt or description.
    NoCapability,
}

impl InstructionError {
    /// Why, in the language of `t` (the model that wrote the instruction reads it).
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        match self {
            InstructionError::NotAnObject => t.tool_instruction_not_object(),
            InstructionError::Arguments(found) => t.tool_instruction_arguments(found),
            InstructionError::NoUri => t.tool_instruction_no_uri(),
            InstructionError::NoCapability => t.tool_instruction_no_capability(),
        }
    }
}

/// In English, as logs show it.
impl std::fmt::Display for InstructionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&crate::texts::Texts::english()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_instruction_shape_reads() {
        assert_eq!(
            McpCall::from_instruction(&json!({"instruction_type": "get_description"})).unwrap(),
            McpCall::Describe
        );
        let t =
            McpCall::from_instruction(&json!({"tool_name": "write", "arguments": {"path": "a"}}))
                .unwrap();
        assert_eq!(
            t,
            McpCall::Tool {
                name: "write".into(),
                arguments: json!({"path": "a"}).as_object().unwrap().clone()
            }
        );
        let r = McpCall::from_instruction(
            &json!({"resource_name": "notes", "arguments": {"uri": "file:///a"}}),
        )
        .unwrap();
        assert_eq!(
            r,
            McpCall::Resource {
                uri: "file:///a".into()
            }
        );
        let p = McpCall::from_instruction(&json!({"prompt_name": "review"})).unwrap();
        assert_eq!(
            p,
            McpCall::Prompt {
                name: "review".into(),
                arguments: Map::new()
            }
        );
    }

    #[test]
    fn bad_instructions_say_why() {
        assert!(McpCall::from_instruction(&json!("x")).is_err());
        assert!(
            McpCall::from_instruction(&json!({"tool_name": "w", "arguments": [1]}))
                .unwrap_err()
                .to_string()
                .contains("arguments")
        );
        assert!(
            McpCall::from_instruction(&json!({"resource_name": "r"}))
                .unwrap_err()
                .to_string()
                .contains("uri")
        );
        assert!(
            McpCall::from_instruction(&json!({"foo": 1}))
                .unwrap_err()
                .to_string()
                .contains("names no capability")
        );
    }
}
