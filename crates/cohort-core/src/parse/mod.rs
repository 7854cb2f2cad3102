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
    #[error("the answer has no <{tag}> tag")]
    MissingTag { tag: &'static str },
    #[error("the answer has neither a <{first}> nor a <{second}> tag")]
    MissingEitherTag {
        first: &'static str,
        second: &'static str,
    },
    #[error("the <{tag}> tag is empty")]
    EmptyTag { tag: &'static str },
    #[error("<{tag}> is not valid JSON: {reason}")]
    InvalidJson { tag: &'static str, reason: String },
    #[error("<{tag}>{} should be {expected}, found {found}", located(.at))]
    WrongShape {
        tag: &'static str,
        at: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("<{tag}>{} field `{field}` is missing", located(.at))]
    MissingField {
        tag: &'static str,
        at: String,
        field: String,
    },
    #[error("<{tag}>{} field `{field}` is empty", located(.at))]
    EmptyField {
        tag: &'static str,
        at: String,
        field: String,
    },
    #[error("<{tag}>{} field `{field}` should be {expected}, found {found}", located(.at))]
    WrongType {
        tag: &'static str,
        at: String,
        field: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("<{tag}>{} field `{field}` is invalid: {reason}", located(.at))]
    InvalidField {
        tag: &'static str,
        at: String,
        field: String,
        reason: String,
    },
    #[error("<{tag}> is invalid: {reason}")]
    Invalid { tag: &'static str, reason: String },
    #[error("<{tag}> has unknown {key} `{action}`; valid {key}s: {valid}")]
    UnknownAction {
        tag: &'static str,
        /// The field that selects the variant: `action`, or `type` for ask_info.
        key: &'static str,
        action: String,
        valid: String,
    },
    #[error("<{tag}>{} field `{field}` has unknown value `{value}`; valid values: {valid}", located(.at))]
    UnknownValue {
        tag: &'static str,
        at: String,
        field: String,
        value: String,
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
