//! The generic lenient reading of LLM answer text (SPEC §7): tags, JSON, fields, the memory
//! block every skill may add. Each skill reads its own answer with these, in its folder under
//! `skills/`. Tolerant of what real models write and total: every function returns a value or
//! a [`ParseError`] for any input, and never panics.
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

mod fields;
mod instructions;
mod json;
mod json_fault;
mod json_scan;
mod memory;
mod step_request;
mod stopped;
mod tags;

pub(crate) use fields::{Obj, list_items, tagged_json, tagged_text};
pub use instructions::tagged_variant;
pub use json::lenient_json;
pub use json_fault::{Fault, JsonFault};
pub use memory::persistent_memory;
pub use step_request::{StepRequest, step_request};
pub use stopped::closed_object;
pub use tags::extract_tag;
pub(crate) use tags::{has_tag, remove_blocks};

use crate::texts::Texts;

/// The JSON inside an answer's `<tag>…</tag>`, if the tag is there (read as leniently as every
/// answer tag).
pub fn tag_json(text: &str, tag: &'static str) -> Option<Result<serde_json::Value, ParseError>> {
    tags::has_tag(text, tag).then(|| fields::tagged_json(text, tag))
}

/// Why an answer could not be read. Its message ([`ParseError::render`], in the team's
/// language) is read by the model asked again and by the operator who sees a failed step, so
/// it names the tag, and the field when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The answer lacks the tag the skill expects.
    MissingTag {
        /// The tag name, without angle brackets.
        tag: &'static str,
    },
    /// The answer has neither of the two tags a skill accepts (`<send_message>` or
    /// `<get_more_info>`).
    MissingEitherTag {
        /// The tag the skill looks for first.
        first: &'static str,
        /// The alternative tag.
        second: &'static str,
    },
    /// The tag is there but holds nothing once trimmed and unfenced.
    EmptyTag {
        /// The tag name.
        tag: &'static str,
    },
    /// The tag's content is not JSON, even read leniently.
    InvalidJson {
        /// The tag name.
        tag: &'static str,
        /// The JSON reader's complaint.
        reason: JsonFault,
    },
    /// The JSON is the wrong kind of value (a string where an object or a list belongs).
    WrongShape {
        /// The tag name.
        tag: &'static str,
        /// Where inside the tag.
        at: At,
        /// The kind of value wanted.
        expected: JsonKind,
        /// The kind of value written.
        found: JsonKind,
    },
    /// A required field is absent (or `null`).
    MissingField {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag.
        at: At,
        /// The missing field's key.
        field: String,
    },
    /// A required string field is empty once trimmed.
    EmptyField {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag.
        at: At,
        /// The empty field's key.
        field: String,
    },
    /// A field holds the wrong kind of JSON value.
    WrongType {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag.
        at: At,
        /// The field's key.
        field: String,
        /// The kind of value wanted.
        expected: JsonKind,
        /// The kind of value written.
        found: JsonKind,
    },
    /// A field has the right kind of value but it cannot be read (e.g. a malformed `ask`).
    InvalidField {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag.
        at: At,
        /// The field's key.
        field: String,
        /// What is wrong with it, and often how to write it.
        reason: String,
    },
    /// A message's `ask` (a question for a person) cannot be read; the refusal shows how to
    /// write one.
    InvalidAsk {
        /// The tag name.
        tag: &'static str,
        /// The deserializer's complaint.
        reason: String,
    },
    /// The tag's value is wrong in a way no single field can be blamed for.
    Invalid {
        /// The tag name.
        tag: &'static str,
        /// The deserializer's complaint.
        reason: String,
    },
    /// The field that picks an instruction's variant names none that exists.
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
    UnknownValue {
        /// The tag name.
        tag: &'static str,
        /// Which object inside the tag.
        at: At,
        /// The field's key.
        field: String,
        /// The value the model wrote.
        value: String,
        /// The valid values, comma-separated.
        valid: String,
    },
}

/// Where inside a tag an error sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// The tag's whole value (its top-level object).
    Whole,
    /// Item `n` (from 1) of the list the tag holds.
    Item(usize),
    /// The plan as a whole, beside its steps (a graph plan's `replan`).
    Plan,
}

/// A kind of JSON value, as an error names what was wanted and what was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonKind {
    /// `null`.
    Null,
    /// `true` or `false` written.
    Boolean,
    /// A number.
    Number,
    /// A string.
    String,
    /// A list.
    List,
    /// An object.
    Object,
    /// Wanted: a JSON object (the whole tag's value, or an item's).
    JsonObject,
    /// Wanted: a JSON list.
    JsonList,
    /// Wanted: `true` or `false`.
    TrueOrFalse,
    /// Wanted: an id or a list of ids.
    IdOrIds,
    /// Wanted: a string or a list of strings.
    StringOrStrings,
}

impl JsonKind {
    /// The kind of `v`.
    pub fn of(v: &serde_json::Value) -> JsonKind {
        use serde_json::Value;
        match v {
            Value::Null => JsonKind::Null,
            Value::Bool(_) => JsonKind::Boolean,
            Value::Number(_) => JsonKind::Number,
            Value::String(_) => JsonKind::String,
            Value::Array(_) => JsonKind::List,
            Value::Object(_) => JsonKind::Object,
        }
    }

    fn render(self, t: &Texts) -> String {
        match self {
            JsonKind::Null => t.kind_null(),
            JsonKind::Boolean => t.kind_boolean(),
            JsonKind::Number => t.kind_number(),
            JsonKind::String => t.kind_string(),
            JsonKind::List => t.kind_list(),
            JsonKind::Object => t.kind_object(),
            JsonKind::JsonObject => t.kind_json_object(),
            JsonKind::JsonList => t.kind_json_list(),
            JsonKind::TrueOrFalse => t.kind_true_or_false(),
            JsonKind::IdOrIds => t.kind_id_or_ids(),
            JsonKind::StringOrStrings => t.kind_string_or_strings(),
        }
    }
}

/// The tag `tag`, and where inside it, as an error message names the place.
fn place(tag: &str, at: At, t: &Texts) -> String {
    match at {
        At::Whole => t.where_tag(tag),
        At::Item(n) => t.where_item(tag, n),
        At::Plan => t.where_plan(tag),
    }
}

impl ParseError {
    /// The message, in the language of `t`.
    pub fn render(&self, t: &Texts) -> String {
        use ParseError as E;
        match self {
            E::MissingTag { tag } => t.parse_missing_tag(tag),
            E::MissingEitherTag { first, second } => t.parse_missing_either(first, second),
            E::EmptyTag { tag } => t.parse_empty_tag(tag),
            E::InvalidJson { tag, reason } => t.parse_invalid_json(tag, reason.render(t)),
            E::WrongShape {
                tag,
                at,
                expected,
                found,
            } => t.parse_wrong_shape(place(tag, *at, t), expected.render(t), found.render(t)),
            E::MissingField { tag, at, field } => t.parse_missing_field(place(tag, *at, t), field),
            E::EmptyField { tag, at, field } => t.parse_empty_field(place(tag, *at, t), field),
            E::WrongType {
                tag,
                at,
                field,
                expected,
                found,
            } => t.parse_wrong_type(
                place(tag, *at, t),
                field,
                expected.render(t),
                found.render(t),
            ),
            E::InvalidField {
                tag,
                at,
                field,
                reason,
            } => t.parse_invalid_field(place(tag, *at, t), field, reason),
            E::InvalidAsk { tag, reason } => {
                t.parse_invalid_field(place(tag, At::Whole, t), "ask", t.parse_ask_forms(reason))
            }
            E::Invalid { tag, reason } => t.parse_invalid(tag, reason),
            E::UnknownAction {
                tag,
                key,
                action,
                valid,
            } => t.parse_unknown_action(tag, key, action, valid),
            E::UnknownValue {
                tag,
                at,
                field,
                value,
                valid,
            } => t.parse_unknown_value(place(tag, *at, t), field, value, valid),
        }
    }
}

/// In English, as logs show it (the model and the console read [`ParseError::render`] in the
/// team's language).
impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&Texts::english()))
    }
}

impl std::error::Error for ParseError {}

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
        crate::skills::read_every_answer(text);
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
            at: At::Item(2),
            field: "executor".into(),
        };
        assert_eq!(
            e.to_string(),
            "<planned_step> item 2 field `executor` is missing"
        );
        let zh = Texts::builtin(crate::texts::Language::Zh);
        assert_eq!(e.render(&zh), "<planned_step> 第 2 项 缺少字段 `executor`");
        let e = ParseError::MissingField {
            tag: "send_message",
            at: At::Whole,
            field: "receiver".into(),
        };
        assert_eq!(e.to_string(), "<send_message> field `receiver` is missing");
        let e = ParseError::WrongType {
            tag: "send_message",
            at: At::Whole,
            field: "need_reply".into(),
            expected: JsonKind::TrueOrFalse,
            found: JsonKind::String,
        };
        assert_eq!(
            e.to_string(),
            "<send_message> field `need_reply` should be true or false, found a string"
        );
        assert_eq!(
            e.render(&zh),
            "<send_message> 的字段 `need_reply` 应为true 或 false，实际是字符串"
        );
    }
}
