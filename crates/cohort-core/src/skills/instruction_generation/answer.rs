//! An instruction_generation answer: `<tool_instruction>`, a JSON object (checked by the tool
//! executor), and its schema.

use crate::parse::{At, JsonKind, ParseError, tagged_json};
use crate::skills::answer_schema::{line, object};
use serde_json::{Value, json};

/// `<tool_instruction>`: a JSON object, checked by the tool executor. A list holding exactly one
/// object is accepted as that object.
pub fn read(text: &str) -> Result<Value, ParseError> {
    const TAG: &str = "tool_instruction";
    match tagged_json(text, TAG)? {
        v @ Value::Object(_) => Ok(v),
        Value::Array(mut items) if items.len() == 1 && items[0].is_object() => Ok(items.remove(0)),
        other => Err(ParseError::WrongShape {
            tag: TAG,
            at: At::Whole,
            expected: JsonKind::JsonObject,
            found: JsonKind::of(&other),
        }),
    }
}

/// `<tool_instruction>`: a description request, or a tool, resource or prompt call.
pub fn schema() -> Value {
    let arguments = json!({ "type": "object" });
    json!({ "anyOf": [
        object(
            json!({ "instruction_type": { "type": "string", "enum": ["get_description"] } }),
            &["instruction_type"],
        ),
        object(json!({ "tool_name": line(), "arguments": arguments }), &["tool_name", "arguments"]),
        object(
            json!({ "resource_name": line(), "arguments": arguments }),
            &["resource_name", "arguments"],
        ),
        object(json!({ "prompt_name": line(), "arguments": arguments }), &["prompt_name", "arguments"]),
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_instructions_are_objects() {
        let text = "Calling it:\n<tool_instruction>\n```json\n{\"tool_name\": \"read\", \"arguments\": {\"path\": \"a.md\",},}\n```\n</tool_instruction>";
        assert_eq!(
            read(text).unwrap(),
            json!({"tool_name": "read", "arguments": {"path": "a.md"}})
        );
        let one =
            "<tool_instruction>[{\"instruction_type\": \"get_description\"}]</tool_instruction>";
        assert_eq!(
            read(one).unwrap(),
            json!({"instruction_type": "get_description"})
        );
        assert_eq!(
            read("<tool_instruction>[1, 2]</tool_instruction>")
                .unwrap_err()
                .to_string(),
            "<tool_instruction> should be a JSON object, found a list"
        );
        assert_eq!(
            read("nothing").unwrap_err().to_string(),
            "the answer has no <tool_instruction> tag"
        );
        assert!(
            read("<tool_instruction>{oops</tool_instruction>")
                .unwrap_err()
                .to_string()
                .starts_with("<tool_instruction> is not valid JSON: ")
        );
    }
}
