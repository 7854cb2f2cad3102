//! Constrained answers (`response_format: json_schema`, see [`super::AnswerFormat`]) read back
//! as the tagged text every skill's parser reads, so one parser serves both ways of asking.

use serde_json::Value;

/// The property whose value is written as plain text, outside any tag (process_message's
/// digest is the answer's text around its tags).
pub const PLAIN_TEXT_KEY: &str = "text";

/// A constrained answer (a JSON object) as the tagged text the parsers read: each property
/// becomes `<key>value</key>` (strings as they are, anything else as JSON), [`PLAIN_TEXT_KEY`]
/// stays plain text, and `null`s are left out. `None` when `answer` is not a JSON object (the
/// endpoint ignored the schema): the text is then read as it is.
pub fn tagged_answer(answer: &str) -> Option<String> {
    let body = answer.trim();
    let body = body
        .strip_prefix("```json")
        .or_else(|| body.strip_prefix("```"))
        .and_then(|b| b.strip_suffix("```"))
        .unwrap_or(body);
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(body.trim()) else {
        return None;
    };
    let mut out = Vec::new();
    for (key, value) in &map {
        let content = match value {
            Value::Null => continue,
            Value::String(s) => s.clone(),
            // `<` escaped (still the same JSON) so a string inside cannot close the tag.
            other => other.to_string().replace('<', "\\u003c"),
        };
        if key == PLAIN_TEXT_KEY {
            out.push(content);
        } else {
            out.push(format!("<{key}>{content}</{key}>"));
        }
    }
    Some(out.join("\n"))
}
