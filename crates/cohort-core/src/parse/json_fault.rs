//! What the JSON reader says of broken JSON, typed: the fault and where it is, so that the
//! model asked again reads it in its team's language. serde_json gives only its own English
//! message; the fault is told from it by that message's words (pinned by a test with a broken
//! text for each fault found to be reachable from text), and a message not recognised is kept
//! as serde_json wrote it.

use crate::texts::Texts;

/// Why a text is not JSON, and where (serde_json's line and column, from 1, in the text the
/// model wrote).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonFault {
    /// What is wrong.
    pub fault: Fault,
    /// The line it is on.
    pub line: usize,
    /// The column.
    pub column: usize,
}

/// What is wrong with a JSON text, as serde_json finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The text ends inside a list.
    EndInList,
    /// … inside an object.
    EndInObject,
    /// … inside a string.
    EndInString,
    /// … before a value.
    EndBeforeValue,
    /// A `:` belongs here.
    ExpectedColon,
    /// A `,` or `]` belongs here.
    ExpectedListCommaOrEnd,
    /// A `,` or `}` belongs here.
    ExpectedObjectCommaOrEnd,
    /// A word that is not `true`, `false` or `null`.
    ExpectedIdent,
    /// A value belongs here.
    ExpectedValue,
    /// A `"` belongs here.
    ExpectedQuote,
    /// A backslash escape that JSON does not have.
    InvalidEscape,
    /// A number JSON cannot read.
    InvalidNumber,
    /// A number too large.
    NumberOutOfRange,
    /// A `\u` escape that names no character.
    InvalidCodePoint,
    /// A `\u` escape cut short.
    HexEscapeEnd,
    /// A lone half of a surrogate pair in a `\u` escape.
    LoneSurrogate,
    /// A raw control character inside a string.
    ControlCharacter,
    /// An object key that is not a string.
    KeyNotString,
    /// A comma before a closing bracket.
    TrailingComma,
    /// Text after the value.
    TrailingCharacters,
    /// Nesting deeper than the reader goes.
    TooDeep,
    /// A message serde_json gives that is none of the above, as it wrote it.
    Other(String),
}

impl JsonFault {
    /// The fault serde_json reports in `e`.
    pub fn of(e: &serde_json::Error) -> JsonFault {
        let message = e.to_string();
        // serde_json writes `<what> at line L column C`; the position is given apart.
        let what = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(what, _)| what);
        JsonFault {
            fault: Fault::from_words(what),
            line: e.line(),
            column: e.column(),
        }
    }

    /// The fault and where, in the language of `t`.
    pub fn render(&self, t: &Texts) -> String {
        t.json_fault(self.fault.render(t), self.line, self.column)
    }
}

/// In English, as logs show it: serde_json's own message.
impl std::fmt::Display for JsonFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&Texts::english()))
    }
}

impl Fault {
    /// serde_json's words for each fault (its `ErrorCode`'s messages).
    const WORDS: [(&'static str, Fault); 21] = [
        ("EOF while parsing a list", Fault::EndInList),
        ("EOF while parsing an object", Fault::EndInObject),
        ("EOF while parsing a string", Fault::EndInString),
        ("EOF while parsing a value", Fault::EndBeforeValue),
        ("expected `:`", Fault::ExpectedColon),
        ("expected `,` or `]`", Fault::ExpectedListCommaOrEnd),
        ("expected `,` or `}`", Fault::ExpectedObjectCommaOrEnd),
        ("expected ident", Fault::ExpectedIdent),
        ("expected value", Fault::ExpectedValue),
        ("expected `\"`", Fault::ExpectedQuote),
        ("invalid escape", Fault::InvalidEscape),
        ("invalid number", Fault::InvalidNumber),
        ("number out of range", Fault::NumberOutOfRange),
        ("invalid unicode code point", Fault::InvalidCodePoint),
        ("unexpected end of hex escape", Fault::HexEscapeEnd),
        ("lone leading surrogate in hex escape", Fault::LoneSurrogate),
        (
            "control character (\\u0000-\\u001F) found while parsing a string",
            Fault::ControlCharacter,
        ),
        ("key must be a string", Fault::KeyNotString),
        ("trailing comma", Fault::TrailingComma),
        ("trailing characters", Fault::TrailingCharacters),
        ("recursion limit exceeded", Fault::TooDeep),
    ];

    fn from_words(what: &str) -> Fault {
        Fault::WORDS
            .into_iter()
            .find(|(words, _)| *words == what)
            .map_or_else(|| Fault::Other(what.to_owned()), |(_, fault)| fault)
    }

    /// What is wrong, in the language of `t`.
    pub fn render(&self, t: &Texts) -> String {
        match self {
            Fault::EndInList => t.json_end_in_list(),
            Fault::EndInObject => t.json_end_in_object(),
            Fault::EndInString => t.json_end_in_string(),
            Fault::EndBeforeValue => t.json_end_before_value(),
            Fault::ExpectedColon => t.json_expected_colon(),
            Fault::ExpectedListCommaOrEnd => t.json_expected_list_comma(),
            Fault::ExpectedObjectCommaOrEnd => t.json_expected_object_comma(),
            Fault::ExpectedIdent => t.json_expected_ident(),
            Fault::ExpectedValue => t.json_expected_value(),
            Fault::ExpectedQuote => t.json_expected_quote(),
            Fault::InvalidEscape => t.json_invalid_escape(),
            Fault::InvalidNumber => t.json_invalid_number(),
            Fault::NumberOutOfRange => t.json_number_out_of_range(),
            Fault::InvalidCodePoint => t.json_invalid_code_point(),
            Fault::HexEscapeEnd => t.json_hex_escape_end(),
            Fault::LoneSurrogate => t.json_lone_surrogate(),
            Fault::ControlCharacter => t.json_control_character(),
            Fault::KeyNotString => t.json_key_not_string(),
            Fault::TrailingComma => t.json_trailing_comma(),
            Fault::TrailingCharacters => t.json_trailing_characters(),
            Fault::TooDeep => t.json_too_deep(),
            Fault::Other(words) => words.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::texts::{Language, english_words};

    /// Broken JSON a model may write, one for each fault a text can cause.
    const BROKEN: &[(&str, Fault)] = &[
        ("[1, 2", Fault::EndInList),
        ("{\"a\": 1", Fault::EndInObject),
        ("\"abc", Fault::EndInString),
        ("", Fault::EndBeforeValue),
        ("{\"a\" 1}", Fault::ExpectedColon),
        ("[1 2]", Fault::ExpectedListCommaOrEnd),
        ("{\"a\": 1 \"b\": 2}", Fault::ExpectedObjectCommaOrEnd),
        ("trux", Fault::ExpectedIdent),
        ("[?]", Fault::ExpectedValue),
        ("{\"a\": 1, }", Fault::TrailingComma),
        ("\"a\\qb\"", Fault::InvalidEscape),
        ("-x", Fault::InvalidNumber),
        ("1e999", Fault::NumberOutOfRange),
        ("\"\\uDC00\"", Fault::LoneSurrogate),
        ("\"\\uZZZZ\"", Fault::InvalidEscape),
        ("\"\\uD800x\"", Fault::HexEscapeEnd),
        ("\"a\u{1}b\"", Fault::ControlCharacter),
        ("{1: 2}", Fault::KeyNotString),
        ("[1] x", Fault::TrailingCharacters),
    ];

    fn fault_of(text: &str) -> JsonFault {
        JsonFault::of(&serde_json::from_str::<serde_json::Value>(text).unwrap_err())
    }

    #[test]
    fn each_fault_is_told_from_serde_jsons_words_and_keeps_them_in_english() {
        for (text, fault) in BROKEN {
            let e = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
            let read = JsonFault::of(&e);
            assert_eq!(&read.fault, fault, "{text:?}: {e}");
            assert_eq!(read.to_string(), e.to_string(), "{text:?}");
        }
        let deep = "[".repeat(200);
        assert_eq!(fault_of(&deep).fault, Fault::TooDeep);
    }

    #[test]
    fn a_chinese_team_reads_every_fault_without_an_english_word() {
        let zh = Texts::builtin(Language::Zh);
        for (text, _) in BROKEN {
            let said = fault_of(text).render(&zh);
            assert!(english_words(&said, &[]).is_empty(), "{text:?}: {said}");
        }
        let said = fault_of("[1 2]").render(&zh);
        assert!(said.contains("第 1 行第 4 列"), "{said}");
    }
}
