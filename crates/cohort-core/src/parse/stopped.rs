//! A JSON object an answer stopped short of its end (a loop was cut off), closed where it can
//! be, so what the model did write is read.

use super::json_scan::OutsideStrings;
use serde_json::Value;

/// The most places a stopped answer is tried closed at (from its end back), so a long answer
/// costs a bounded number of parses.
const CLOSINGS_TRIED: usize = 64;

/// A constrained answer stopped before its end (a loop was cut off, see
/// `llm::repetition`), closed where it can be: the open string and every open bracket are
/// closed at its end, or else just before one of its last commas (dropping a half-written key
/// or value). `None` when it does not open a JSON object or no closing parses. What the model
/// wrote stays as it was; only the part it never finished is left out.
pub fn closed_object(answer: &str) -> Option<String> {
    let body = answer.trim_start();
    let body = body
        .strip_prefix("```json")
        .or_else(|| body.strip_prefix("```"))
        .unwrap_or(body)
        .trim_start();
    if !body.starts_with('{') {
        return None;
    }
    // Closers of the open brackets, innermost last; where each comma outside a string stands
    // with the closers open there.
    let mut open: Vec<char> = Vec::new();
    let mut commas: Vec<(usize, Vec<char>)> = Vec::new();
    let mut scan = OutsideStrings::new(body);
    for (i, c) in scan.by_ref() {
        match c {
            '{' => open.push('}'),
            '[' => open.push(']'),
            '}' | ']' => {
                if open.pop() != Some(c) {
                    return None;
                }
                if open.is_empty() {
                    return Some(body[..=i].to_string()).filter(|t| is_object(t));
                }
            }
            ',' => commas.push((i, open.clone())),
            _ => {}
        }
    }
    let closed = |text: &str, open: &[char]| {
        let mut t = text.trim_end().to_string();
        t.extend(open.iter().rev());
        t
    };
    let mut end = body.to_string();
    if scan.in_string {
        if scan.escaped {
            end.pop();
        }
        end.push('"');
    }
    std::iter::once(closed(&end, &open))
        .chain(
            commas
                .iter()
                .rev()
                .take(CLOSINGS_TRIED)
                .map(|(at, open)| closed(&body[..*at], open)),
        )
        .find(|t| is_object(t))
}

fn is_object(text: &str) -> bool {
    matches!(serde_json::from_str::<Value>(text), Ok(Value::Object(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_stopped_in_a_loop_is_closed_with_its_object() {
        let cut = r#"{"completion_summary": "Soft rain whispers softly, gentle whispers softly"#;
        assert_eq!(
            closed_object(cut).as_deref(),
            Some(r#"{"completion_summary": "Soft rain whispers softly, gentle whispers softly"}"#)
        );
    }

    #[test]
    fn a_half_written_key_or_value_is_left_out_at_the_comma_before_it() {
        let cut = r#"{"plan": [{"type": "skill", "executor": "think"}, {"type": "ski"#;
        let closed = closed_object(cut).unwrap();
        let v: Value = serde_json::from_str(&closed).unwrap();
        assert_eq!(v["plan"].as_array().unwrap().len(), 2, "{closed}");
        let cut = r#"{"plan": [{"type": "skill"}], "reas"#;
        assert_eq!(
            closed_object(cut).as_deref(),
            Some(r#"{"plan": [{"type": "skill"}]}"#)
        );
        let cut = r#"{"a": "x", "b": "#;
        assert_eq!(closed_object(cut).as_deref(), Some(r#"{"a": "x"}"#));
    }

    #[test]
    fn an_escape_cut_in_half_is_dropped_and_quotes_inside_strings_are_text() {
        let cut = "{\"text\": \"he said \\\"rain\\\" and { left \\";
        let closed = closed_object(cut).unwrap();
        let v: Value = serde_json::from_str(&closed).unwrap();
        assert_eq!(v["text"], "he said \"rain\" and { left ");
    }

    #[test]
    fn what_is_not_an_object_is_not_closed() {
        assert_eq!(closed_object("Autumn rain, autumn rain"), None);
        assert_eq!(closed_object("[1, 2"), None);
        assert_eq!(closed_object("{\"a\": [1}"), None, "mismatched brackets");
        assert_eq!(
            closed_object("```json\n{\"a\": 1} trailing").as_deref(),
            Some("{\"a\": 1}")
        );
    }
}
