//! A process_message answer: its digest (the text without the runtime's blocks) and the
//! optional `<react_action>`, read leniently.

use crate::parse::{ParseError, StepRequest, remove_blocks, step_request, tagged_json};
use serde_json::Value;

/// process_message's optional `<react_action>{step_intention, text_content}`. No tag, or a tag
/// holding nothing (empty, `null`, `{}`, `[]`, "none"), means no reaction; anything else must be a
/// valid request. A list of exactly one request is accepted.
pub fn react_action(text: &str) -> Result<Option<StepRequest>, ParseError> {
    const TAG: &str = "react_action";
    let value = match tagged_json(text, TAG) {
        Err(ParseError::MissingTag { .. } | ParseError::EmptyTag { .. }) => return Ok(None),
        other => other?,
    };
    match &value {
        Value::Null => Ok(None),
        Value::Object(map) if map.is_empty() => Ok(None),
        Value::Array(items) if items.is_empty() => Ok(None),
        Value::Array(items) if items.len() == 1 => step_request(TAG, &items[0]).map(Some),
        Value::String(s)
            if matches!(
                s.trim().to_ascii_lowercase().as_str(),
                "" | "none" | "null" | "no"
            ) =>
        {
            Ok(None)
        }
        other => step_request(TAG, other).map(Some),
    }
}

/// The digest process_message records: the answer without its `<react_action>` and
/// `<persistent_memory>` blocks, which are instructions to the runtime, not content.
pub fn digest(text: &str) -> String {
    let without = remove_blocks(&remove_blocks(text, "react_action"), "persistent_memory");
    collapse_blank_lines(without.trim())
}

/// Removing a block leaves the blank lines that surrounded it; keep at most one.
fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.lines() {
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn react_action_is_optional() {
        assert_eq!(react_action("Noted, nothing to do.").unwrap(), None);
        assert_eq!(react_action("<react_action></react_action>").unwrap(), None);
        assert_eq!(
            react_action("<react_action>null</react_action>").unwrap(),
            None
        );
        assert_eq!(
            react_action("<react_action>{}</react_action>").unwrap(),
            None
        );
        assert_eq!(
            react_action("<react_action>none</react_action>").unwrap(),
            None
        );
    }

    #[test]
    fn react_action_is_read_amid_noise() {
        let text = "收到。\n<react_action>\n```json\n{'step_intention': '回复经理', 'text_content': 'draft 🎯',}\n```\n";
        assert_eq!(
            react_action(text).unwrap(),
            Some(StepRequest {
                step_intention: "回复经理".into(),
                text_content: "draft 🎯".into()
            })
        );
    }

    #[test]
    fn broken_react_action_is_an_error() {
        assert_eq!(
            react_action("<react_action>{\"text_content\": \"x\"}</react_action>")
                .unwrap_err()
                .to_string(),
            "<react_action> field `step_intention` is missing"
        );
        assert!(
            react_action("<react_action>{\"step_intention\": </react_action>")
                .unwrap_err()
                .to_string()
                .starts_with("<react_action> is not valid JSON")
        );
    }

    #[test]
    fn the_digest_drops_runtime_blocks() {
        let text = "The PM wants the draft by Friday.\n\n<react_action>{\"step_intention\": \"x\"}</react_action>\n\n\
                    <persistent_memory>[{\"add\": \"deadline friday\"}]</persistent_memory>\n\n下周见 👋\n";
        assert_eq!(
            digest(text),
            "The PM wants the draft by Friday.\n\n下周见 👋"
        );
        assert_eq!(digest("  plain  "), "plain");
        assert_eq!(digest("kept <react_action>{\"step_intention\": "), "kept");
    }
}
