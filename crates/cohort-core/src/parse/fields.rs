//! Reading tagged JSON and its typed fields, with errors that name the tag, the item and the field.

use super::json::lenient_json;
use super::tags::{extract_tag, occurrences, strip_fences};
use super::{At, JsonKind, ParseError};
use serde_json::{Map, Value};

/// The JSON value inside `<tag>`. The last occurrence is tried first; earlier ones are tried when
/// it is not JSON (a tag mentioned in prose after the real answer). The error, if all fail, is
/// about the last occurrence.
pub(crate) fn tagged_json(text: &str, tag: &'static str) -> Result<Value, ParseError> {
    let found = occurrences(text, tag);
    if found.is_empty() {
        return Err(ParseError::MissingTag { tag });
    }
    let mut first_err = None;
    for content in found
        .iter()
        .map(|raw| strip_fences(raw))
        .filter(|c| !c.is_empty())
    {
        match lenient_json(content) {
            Ok(v) => return Ok(v),
            Err(reason) => {
                first_err.get_or_insert(reason);
            }
        }
    }
    Err(match first_err {
        Some(reason) => ParseError::InvalidJson { tag, reason },
        None => ParseError::EmptyTag { tag },
    })
}

/// The non-empty text inside `<tag>`.
pub(crate) fn tagged_text(text: &str, tag: &'static str) -> Result<String, ParseError> {
    match extract_tag(text, tag) {
        None => Err(ParseError::MissingTag { tag }),
        Some(s) if s.is_empty() => Err(ParseError::EmptyTag { tag }),
        Some(s) => Ok(s),
    }
}

/// The entries of a JSON list; a lone object counts as a list of one, and `null` as empty.
pub(crate) fn list_items(tag: &'static str, value: Value) -> Result<Vec<Value>, ParseError> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Object(_) => Ok(vec![value]),
        Value::Null => Ok(Vec::new()),
        other => Err(ParseError::WrongShape {
            tag,
            at: At::Whole,
            expected: JsonKind::JsonList,
            found: JsonKind::of(&other),
        }),
    }
}

/// The location of the `n`th (0-based) entry of a list, as users count.
/// One JSON object being read field by field. `null` counts as absent, extra fields are ignored,
/// strings are trimmed.
pub(crate) struct Obj<'a> {
    tag: &'static str,
    at: At,
    map: &'a Map<String, Value>,
}

impl<'a> Obj<'a> {
    pub(crate) fn new(tag: &'static str, at: At, value: &'a Value) -> Result<Self, ParseError> {
        match value {
            Value::Object(map) => Ok(Obj { tag, at, map }),
            other => Err(ParseError::WrongShape {
                tag,
                at,
                expected: JsonKind::JsonObject,
                found: JsonKind::of(other),
            }),
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// The value of the first of `names` present (for keys models spell two ways).
    fn get_any(&self, names: &[&str]) -> Option<&'a Value> {
        names.iter().find_map(|n| self.get(n))
    }

    pub(crate) fn missing(&self, field: &str) -> ParseError {
        ParseError::MissingField {
            tag: self.tag,
            at: self.at,
            field: field.to_owned(),
        }
    }

    pub(crate) fn empty(&self, field: &str) -> ParseError {
        ParseError::EmptyField {
            tag: self.tag,
            at: self.at,
            field: field.to_owned(),
        }
    }

    pub(crate) fn wrong(&self, field: &str, expected: JsonKind, found: &Value) -> ParseError {
        ParseError::WrongType {
            tag: self.tag,
            at: self.at,
            field: field.to_owned(),
            expected,
            found: JsonKind::of(found),
        }
    }

    fn string_of(&self, field: &str, v: &Value) -> Result<String, ParseError> {
        match v {
            Value::String(s) => Ok(s.trim().to_owned()),
            other => Err(self.wrong(field, JsonKind::String, other)),
        }
    }

    /// A required, non-empty string.
    pub(crate) fn str(&self, name: &str) -> Result<String, ParseError> {
        self.str_any(&[name])
    }

    /// A required, non-empty string under the first of `names` present; errors name `names[0]`.
    pub(crate) fn str_any(&self, names: &[&str]) -> Result<String, ParseError> {
        let field = names.first().copied().unwrap_or_default();
        let v = self.get_any(names).ok_or_else(|| self.missing(field))?;
        let s = self.string_of(field, v)?;
        if s.is_empty() {
            Err(self.empty(field))
        } else {
            Ok(s)
        }
    }

    /// An optional string; empty counts as absent.
    pub(crate) fn opt_str(&self, name: &str) -> Result<Option<String>, ParseError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => Ok(Some(self.string_of(name, v)?).filter(|s| !s.is_empty())),
        }
    }

    /// An optional string that defaults to empty.
    pub(crate) fn text(&self, name: &str) -> Result<String, ParseError> {
        Ok(self.opt_str(name)?.unwrap_or_default())
    }

    /// An optional id: a string, or a number as its digits (models number their steps).
    pub(crate) fn opt_id(&self, name: &str) -> Result<Option<String>, ParseError> {
        match self.get(name) {
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            _ => self.opt_str(name),
        }
    }

    /// An optional list of ids (strings or numbers); a single id is a list of one, absent is
    /// empty.
    pub(crate) fn id_list(&self, name: &str) -> Result<Vec<String>, ParseError> {
        const EXPECTED: JsonKind = JsonKind::IdOrIds;
        let items: &[Value] = match self.get(name) {
            None => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(v @ (Value::String(_) | Value::Number(_))) => std::slice::from_ref(v),
            Some(other) => return Err(self.wrong(name, EXPECTED, other)),
        };
        let mut out: Vec<String> = Vec::with_capacity(items.len());
        for item in items {
            let id = match item {
                Value::String(s) => s.trim().to_owned(),
                Value::Number(n) => n.to_string(),
                other => return Err(self.wrong(name, EXPECTED, other)),
            };
            if !id.is_empty() && !out.contains(&id) {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// A boolean; `"true"`/`"false"`/`"yes"`/`"no"` strings are accepted too.
    pub(crate) fn bool_or(&self, name: &str, default: bool) -> Result<bool, ParseError> {
        match self.get(name) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v @ Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" => Ok(true),
                "false" | "no" => Ok(false),
                _ => Err(self.wrong(name, JsonKind::TrueOrFalse, v)),
            },
            Some(other) => Err(self.wrong(name, JsonKind::TrueOrFalse, other)),
        }
    }

    /// A required list of non-empty strings; a single string is a list of one. Duplicates are
    /// dropped, keeping the first.
    pub(crate) fn str_list(&self, name: &str) -> Result<Vec<String>, ParseError> {
        const EXPECTED: JsonKind = JsonKind::StringOrStrings;
        let v = self.get(name).ok_or_else(|| self.missing(name))?;
        let items: &[Value] = match v {
            Value::Array(items) => items,
            Value::String(_) => std::slice::from_ref(v),
            other => return Err(self.wrong(name, EXPECTED, other)),
        };
        let mut out: Vec<String> = Vec::with_capacity(items.len());
        for item in items {
            let Value::String(s) = item else {
                return Err(self.wrong(name, EXPECTED, item));
            };
            let s = s.trim();
            if !s.is_empty() && !out.iter().any(|o| o == s) {
                out.push(s.to_owned());
            }
        }
        if out.is_empty() {
            Err(self.empty(name))
        } else {
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_read_with_errors_naming_them() {
        let v = json!({"s": " x ", "n": 3, "b": "Yes", "l": "one", "z": null});
        let o = Obj::new("t", At::Item(1), &v).unwrap();
        assert_eq!(o.str("s").unwrap(), "x");
        assert_eq!(
            o.str("z").unwrap_err().to_string(),
            "<t> item 1 field `z` is missing"
        );
        assert_eq!(
            o.str("n").unwrap_err().to_string(),
            "<t> item 1 field `n` should be a string, found a number"
        );
        assert!(o.bool_or("b", false).unwrap());
        assert!(!o.bool_or("absent", false).unwrap());
        assert_eq!(o.str_list("l").unwrap(), vec!["one"]);
        assert_eq!(
            o.str_list("n").unwrap_err().to_string(),
            "<t> item 1 field `n` should be a string or a list of strings, found a number"
        );
        assert_eq!(o.opt_str("z").unwrap(), None);
    }

    #[test]
    fn a_tag_mentioned_in_prose_after_the_answer_falls_back_to_the_real_one() {
        let text =
            "<tool_instruction>{\"a\": 1}</tool_instruction>\nI used the <tool_instruction> tag.";
        assert_eq!(
            tagged_json(text, "tool_instruction").unwrap(),
            json!({"a": 1})
        );
    }
}
