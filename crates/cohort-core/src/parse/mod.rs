//! LLM answer text → typed skill answers (SPEC §7), tolerant of what real models write and total:
//! every function returns a value or a [`ParseError`] for any input, and never panics.
//!
//! What the parsers put up with, because models do it:
//! - prose before and after the tag, and code fences around the tag or inside it;
//! - a tag written several times (a model quotes the format, then answers): the last occurrence
//!   wins, and JSON parsers fall back to earlier occurrences when the last one is not JSON;
//! - a tag opened and never closed at the end of the answer: the rest of the answer is its content;
//! - JSON with trailing commas, `//`, `#` and `/* */` comments, Python `True`/`False`/`None`,
//!   single-quoted or “smart-quoted” strings, raw newlines inside strings, bare-word keys, and
//!   prose around the value ([`lenient_json`]);
//! - extra fields (ignored); a single object where a list is expected.
//!
//! Tag names are matched exactly (`<planned_step>`, not `< Planned_Step >`).

mod answers;
mod fields;
mod instructions;
mod json;
mod json_scan;
mod messages;
mod stopped;
mod tags;

pub use answers::{
    RawPlan, RawPlannedStep, completion_summary, persistent_memory, plan, planned_steps,
    quick_think, think, tool_instruction,
};
pub use instructions::{agent_instruction, ask_info, task_instruction};
pub use json::lenient_json;
pub use messages::{
    SendMessageAnswer, SendMessageDraft, StepRequest, process_message_digest, react_action,
    send_message,
};
pub use stopped::closed_object;
pub use tags::extract_tag;

/// The JSON inside an answer's `<tag>…</tag>`, if the tag is there (read as leniently as every
/// answer tag).
pub fn tag_json(text: &str, tag: &'static str) -> Option<Result<serde_json::Value, ParseError>> {
    tags::has_tag(text, tag).then(|| fields::tagged_json(text, tag))
}

/// Why an answer could not be read. Messages are written for the operator who sees a failed
/// step, so they name the tag, and the field when there is one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The answer lacks the tag the skill expects.
    #[error("the answer has no <{tag}> tag")]
    MissingTag {
        /// The tag name, without angle brackets.
        tag: &'static str,
    },
    /// The answer has neither of the two tags a skill accepts (`<send_message>` or
    /// `<get_more_info>`).
    #[error("the answer has neither a <{first}> nor a <{second}> tag")]
    MissingEitherTag {
        /// The tag the skill looks for first.
        first: &'static str,
        /// The alternative tag.
        second: &'static str,
    },
    /// The tag is there but holds nothing once trimmed and unfenced.
    #[error("the <{tag}> tag is empty")]
    EmptyTag {
        /// The tag name.
        tag: &'static str,
    },
    /// The tag's content is not JSON, even read leniently.
    #[error("<{tag}> is not valid JSON: {reason}")]
    InvalidJson {
        /// The tag name.
        tag: &'static str,
        /// The JSON reader's complaint.
        reason: String,
    },
    /// The JSON is the wrong kind of value (a string where an object or a list belongs).
    #[error("<{tag}>{} should be {expected}, found {found}", located(.at))]
    WrongShape {
        /// The tag name.
        tag: &'static str,
        /// Where inside the tag ("item 2"); empty for the tag's whole value.
        at: String,
        /// The kind of value wanted ("a JSON object").
        expected: &'static str,
        /// The kind of value written ("a string", "a list", …).
        found: &'static str,
    },
    /// A required field is absent (or `null`).
    #[error("<{tag}>{} field `{field}` is missing", located(.at))]
    MissingField {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag ("item 2"); empty for the top-level object.
        at: String,
        /// The missing field's key.
        field: String,
    },
    /// A required string field is empty once trimmed.
    #[error("<{tag}>{} field `{field}` is empty", located(.at))]
    EmptyField {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag; empty for the top-level object.
        at: String,
        /// The empty field's key.
        field: String,
    },
    /// A field holds the wrong kind of JSON value.
    #[error("<{tag}>{} field `{field}` should be {expected}, found {found}", located(.at))]
    WrongType {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag; empty for the top-level object.
        at: String,
        /// The field's key.
        field: String,
        /// The kind of value wanted ("a string", "a boolean", …).
        expected: &'static str,
        /// The kind of value written.
        found: &'static str,
    },
    /// A field has the right kind of value but it cannot be read (e.g. a malformed `ask`).
    #[error("<{tag}>{} field `{field}` is invalid: {reason}", located(.at))]
    InvalidField {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag; empty for the top-level object.
        at: String,
        /// The field's key.
        field: String,
        /// What is wrong with it, and often how to write it.
        reason: String,
    },
    /// The tag's value is wrong in a way no single field can be blamed for.
    #[error("<{tag}> is invalid: {reason}")]
    Invalid {
        /// The tag name.
        tag: &'static str,
        /// The deserializer's complaint.
        reason: String,
    },
    /// The field that picks an instruction's variant names none that exists.
    #[error("<{tag}> has unknown {key} `{action}`; valid {key}s: {valid}")]
    UnknownAction {
        /// The tag name.
        tag: &'static str,
        /// The field that selects the variant: `action`, or `type` for ask_info.
        key: &'static str,
        /// The value the model wrote there.
        action: String,
        /// The valid values, comma-separated, so the re-ask can list them.
        valid: String,
    },
    /// A field whose value must be one of a fixed set holds something else.
    #[error("<{tag}>{} field `{field}` has unknown value `{value}`; valid values: {valid}", located(.at))]
    UnknownValue {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag; empty for the top-level object.
        at: String,
        /// The field's key.
        field: String,
        /// The value the model wrote.
        value: String,
        /// The valid values, comma-separated.
        valid: String,
    },
}

/// Where inside the tag an error sits ("item 2", "stage 1"), as a prefix for the message.
fn located(at: &str) -> String {
    if at.is_empty() {
        String::new()
    } else {
        format!(" {at}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64: deterministic, so a failing input can be reproduced from its index.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Fragments chosen to reach every branch of the scanners: tag openers and closers, JSON
    /// punctuation, quotes of every kind, comment starters, fences and multibyte characters.
    const PIECES: &[&str] = &[
        "<",
        ">",
        "/",
        "{",
        "}",
        "[",
        "]",
        "\"",
        "'",
        ":",
        ",",
        " ",
        "\n",
        "\\",
        "#",
        "`",
        "```json\n",
        "```",
        "a",
        "_",
        "1",
        "-",
        "e",
        "中",
        "文",
        "😀",
        "é",
        "“",
        "”",
        "‘",
        "’",
        "True",
        "None",
        "//",
        "/*",
        "*/",
        "<planned_step>",
        "</planned_step>",
        "<send_message>",
        "</send_message>",
        "<get_more_info>",
        "<react_action>",
        "</react_action>",
        "<persistent_memory>",
        "</persistent_memory>",
        "<task_instruction>",
        "</task_instruction>",
        "<tool_instruction>",
        "<instruction>",
        "</instruction>",
        "<think>",
        "</think>",
        "<quick_think>",
        "<completion_summary>",
        "<return_waiting_id>",
        "</return_waiting_id>",
        "\"action\"",
        "\"add_task\"",
        "\"receiver\"",
        "\"step_intention\"",
        "\"add\"",
        "\"delete\"",
        "{\"a\":",
        "\"start_stage\"",
    ];

    fn arbitrary(rng: &mut Rng) -> String {
        let len = rng.below(60);
        (0..len).map(|_| PIECES[rng.below(PIECES.len())]).collect()
    }

    fn feed_every_parser(text: &str) {
        let _ = extract_tag(text, "planned_step");
        let _ = extract_tag(text, "");
        let _ = planned_steps(text);
        let _ = completion_summary(text);
        let _ = think(text);
        let _ = quick_think(text);
        let _ = send_message(text);
        let _ = react_action(text);
        let _ = process_message_digest(text);
        let _ = task_instruction(text);
        let _ = tool_instruction(text);
        let _ = persistent_memory(text);
        let _ = lenient_json(text);
    }

    #[test]
    fn no_parser_panics_on_arbitrary_text() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..4000 {
            let text = arbitrary(&mut rng);
            feed_every_parser(&text);
            // The same text inside each tag reaches the JSON and field readers, not just the
            // tag scanner.
            for tag in [
                "planned_step",
                "send_message",
                "task_instruction",
                "persistent_memory",
            ] {
                feed_every_parser(&format!("<{tag}>{text}</{tag}>"));
                feed_every_parser(&format!("<{tag}>[{{{text}"));
            }
        }
    }

    #[test]
    fn no_parser_panics_on_deep_nesting_or_lone_multibyte_text() {
        feed_every_parser(&format!(
            "<planned_step>{}</planned_step>",
            "[".repeat(5000)
        ));
        feed_every_parser(&format!(
            "<tool_instruction>{}{}",
            "{\"a\":".repeat(3000),
            "}".repeat(3000)
        ));
        feed_every_parser("<think>😀");
        feed_every_parser("中文<");
        feed_every_parser("<planned_step>“");
    }

    #[test]
    fn error_messages_read_as_sentences() {
        let e = ParseError::MissingField {
            tag: "planned_step",
            at: "item 2".into(),
            field: "executor".into(),
        };
        assert_eq!(
            e.to_string(),
            "<planned_step> item 2 field `executor` is missing"
        );
        let e = ParseError::MissingField {
            tag: "send_message",
            at: String::new(),
            field: "receiver".into(),
        };
        assert_eq!(e.to_string(), "<send_message> field `receiver` is missing");
    }
}
