//! What an MCP server says it offers (SPEC §8's description, the answer to `get_description`):
//! its instructions, its tools with their schemas and annotations, its resources, resource
//! templates and prompts, typed from the MCP client on.
//!
//! Its JSON is what a describe step records, replay answers again and instruction_generation's
//! prompt shows. It is the JSON the description was before it was typed, byte for byte: every
//! struct declares its fields in the order of their JSON names (the order a `serde_json::Value`
//! writes them in, which is how it used to be written), and an absent optional field is `null`
//! or left out as it was then.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A server's description: what `McpClient::describe` answers.
///
/// Fields in the order of their JSON names (see the module's note).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerDescription {
    /// The server's own instructions (e.g. its workspace root and URI scheme): they help an
    /// agent write correct calls. `null` when it gives none.
    pub instructions: Option<String>,
    /// Its prompts; empty when it has none.
    #[serde(default)]
    pub prompts: Vec<PromptDescription>,
    /// Its resource templates; empty when it has none.
    #[serde(default)]
    pub resource_templates: Vec<ResourceTemplateDescription>,
    /// Its resources; empty when it has none.
    #[serde(default)]
    pub resources: Vec<ResourceDescription>,
    /// Its tools, in the server's order; empty when it has none.
    #[serde(default)]
    pub tools: Vec<ToolDescription>,
}

impl ServerDescription {
    /// The tool named `name`, if the server has one (the first, should it list two).
    pub fn tool(&self, name: &str) -> Option<&ToolDescription> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// One tool as its server describes it.
///
/// Fields in the order of their JSON names (see the module's note).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolDescription {
    /// What the tool says of its own behaviour; left out when it says nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// What the server says it does; `null` when it says nothing.
    pub description: Option<String>,
    /// The JSON schema of its arguments (an object from any server that follows MCP).
    #[serde(default)]
    pub input_schema: Value,
    /// The tool's name: what a call names.
    pub name: String,
    /// The JSON schema its structured results must fit; left out when it declares none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// A title for people; left out when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl ToolDescription {
    /// Whether the tool says it only reads (`readOnlyHint`): its results may be cached, and
    /// it is LOW risk.
    pub fn only_reads(&self) -> bool {
        self.annotations
            .as_ref()
            .is_some_and(ToolAnnotations::only_reads)
    }

    /// Whether the tool says calling it again does no harm (`readOnlyHint` or
    /// `idempotentHint`): a call cut off or failed for a passing reason may be made again.
    pub fn repeatable(&self) -> bool {
        self.annotations
            .as_ref()
            .is_some_and(ToolAnnotations::repeatable)
    }
}

/// A tool's annotations (MCP `ToolAnnotations`): hints at what calling it does. Each hint is
/// `None` when the tool does not give it; MCP defines what that means for each.
///
/// Fields in the order of their JSON names (see the module's note).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// `destructiveHint`: it may overwrite or delete (`false`: it only adds). MCP's default is
    /// `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// `idempotentHint`: calling it again with the same arguments changes nothing more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// `openWorldHint`: it reaches outside entities (`false`: its world is closed). MCP's
    /// default is `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
    /// `readOnlyHint`: it does not change its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl ToolAnnotations {
    /// Whether they say the tool only reads (`readOnlyHint: true`).
    pub fn only_reads(&self) -> bool {
        self.read_only_hint == Some(true)
    }

    /// Whether they say calling the tool again does no harm (`readOnlyHint` or
    /// `idempotentHint` true).
    pub fn repeatable(&self) -> bool {
        self.only_reads() || self.idempotent_hint == Some(true)
    }
}

/// One resource as its server lists it.
///
/// Fields in the order of their JSON names (see the module's note).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceDescription {
    /// What it holds; `null` when the server does not say.
    pub description: Option<String>,
    /// Its MIME type; `null` when the server does not say.
    pub mime_type: Option<String>,
    /// Its name.
    pub name: String,
    /// Its URI: what a read names.
    pub uri: String,
}

/// One resource template (a family of resources, RFC 6570) as its server lists it.
///
/// Fields in the order of their JSON names (see the module's note).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceTemplateDescription {
    /// What its resources hold; `null` when the server does not say.
    pub description: Option<String>,
    /// Its resources' MIME type; `null` when the server does not say.
    pub mime_type: Option<String>,
    /// Its name.
    pub name: String,
    /// The URI template its resources' URIs follow.
    pub uri_template: String,
}

/// One prompt as its server lists it.
///
/// Fields in the order of their JSON names (see the module's note).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptDescription {
    /// The arguments it is filled in with; empty when it takes none.
    #[serde(default)]
    pub arguments: Vec<PromptArgumentDescription>,
    /// What it is for; `null` when the server does not say.
    pub description: Option<String>,
    /// Its name: what a get names.
    pub name: String,
}

/// One argument of a prompt.
///
/// Fields in the order of their JSON names (see the module's note).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgumentDescription {
    /// What it is; `null` when the server does not say.
    pub description: Option<String>,
    /// Its name.
    pub name: String,
    /// Whether the prompt needs it (`false` when the server does not say).
    #[serde(default)]
    pub required: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A description with every field given, and one with every optional field absent.
    fn described() -> Value {
        json!({
            "instructions": "files live under /ws",
            "prompts": [
                {"arguments": [{"description": "whom", "name": "who", "required": true},
                               {"description": null, "name": "tone", "required": false}],
                 "description": "greets", "name": "greet"},
                {"arguments": [], "description": null, "name": "bare"}
            ],
            "resource_templates": [
                {"description": "a day's log", "mime_type": "text/plain", "name": "log",
                 "uri_template": "log://{day}"}
            ],
            "resources": [
                {"description": null, "mime_type": null, "name": "readme", "uri": "file:///README"}
            ],
            "tools": [
                {"annotations": {"destructiveHint": false, "idempotentHint": true,
                                 "openWorldHint": false, "readOnlyHint": false, "title": "Append"},
                 "description": "appends a line",
                 "input_schema": {"type": "object", "required": ["line"],
                                  "properties": {"line": {"type": "string"}}},
                 "name": "append", "output_schema": {"type": "object"}, "title": "Append a line"},
                {"description": null, "input_schema": {"type": "object"}, "name": "bare"}
            ]
        })
    }

    /// Records, prompts and `cohort mcp describe` show the description as the JSON it was
    /// before it was typed: written from the type, it is that JSON, byte for byte.
    #[test]
    fn a_description_is_written_as_the_json_it_was_read_from_byte_for_byte() {
        let json = described();
        let typed: ServerDescription = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_string(&typed).unwrap(), json.to_string());
        assert_eq!(
            serde_json::to_string_pretty(&typed).unwrap(),
            serde_json::to_string_pretty(&json).unwrap()
        );
        let empty = json!({"instructions": null, "prompts": [], "resource_templates": [],
                           "resources": [], "tools": []});
        let typed = ServerDescription::default();
        assert_eq!(serde_json::to_string(&typed).unwrap(), empty.to_string());
    }

    #[test]
    fn the_hints_say_which_tools_only_read_and_which_may_be_called_again() {
        let typed: ServerDescription = serde_json::from_value(described()).unwrap();
        let append = typed.tool("append").unwrap();
        assert!(!append.only_reads() && append.repeatable());
        let bare = typed.tool("bare").unwrap();
        assert!(!bare.only_reads() && !bare.repeatable());
        let read = ToolAnnotations {
            read_only_hint: Some(true),
            ..ToolAnnotations::default()
        };
        assert!(read.only_reads() && read.repeatable());
        assert!(typed.tool("missing").is_none());
    }
}
