//! Instructions as tagged JSON objects whose `action` (or `type`) picks the variant: the
//! readers of task_manager's `<task_instruction>`, agent_manager's and ask_info's are built on it.
//!
//! The shapes are the serde derives of `message::TaskInstruction` and the others, so a field added
//! there is read here without a second copy of the schema. This module only forgives what models
//! write differently, and turns serde's errors into ones that name the field.

use super::fields::tagged_json;
use super::{At, JsonKind, ParseError};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Models write `Add_Task`, `add-task` or `add task` for `add_task`.
fn action_name(raw: &str) -> String {
    raw.trim().to_ascii_lowercase().replace(['-', ' '], "_")
}

/// A list holding exactly one object stands for that object.
fn single_object(value: Value) -> Value {
    match value {
        Value::Array(mut items) if items.len() == 1 && items[0].is_object() => items.remove(0),
        other => other,
    }
}

/// `null` fields count as absent, so that defaults apply and required ones read as missing.
fn drop_nulls(map: &mut Map<String, Value>) {
    map.retain(|_, v| !v.is_null());
}

/// A tagged JSON object whose `key` field (`action` or `type`) selects the variant of `T`;
/// `fix` forgives shapes models get wrong before serde reads it. The action's spelling is
/// forgiven (`Add_Task`, `add-task`), a list of one object is that object, `null` fields are
/// absent, and serde's errors become ones that name the field.
pub fn tagged_variant<T: DeserializeOwned>(
    text: &str,
    tag: &'static str,
    key: &'static str,
    fix: impl Fn(&mut Map<String, Value>),
) -> Result<T, ParseError> {
    let mut value = single_object(tagged_json(text, tag)?);
    let Some(map) = value.as_object_mut() else {
        return Err(not_an_object(tag, &value));
    };
    drop_nulls(map);
    let mut action = None;
    if let Some(Value::String(raw)) = map.get_mut(key) {
        *raw = action_name(raw);
        action = Some(raw.clone());
    }
    fix(map);
    typed(tag, key, value, action.as_deref(), Value::as_object_mut)
}

fn not_an_object(tag: &'static str, value: &Value) -> ParseError {
    ParseError::WrongShape {
        tag,
        at: At::Whole,
        expected: JsonKind::JsonObject,
        found: JsonKind::of(value),
    }
}

/// Deserializes `value` as `T`, naming the field at fault when it fails. `fields` reaches the
/// object that holds the variant's fields, so a faulty one can be found by taking it away.
fn typed<T: DeserializeOwned>(
    tag: &'static str,
    key: &'static str,
    value: Value,
    action: Option<&str>,
    fields: impl Fn(&mut Value) -> Option<&mut Map<String, Value>>,
) -> Result<T, ParseError> {
    let err = match serde_json::from_value::<T>(value.clone()) {
        Ok(t) => return Ok(t),
        Err(e) => e.to_string(),
    };
    // The model (and a person reading the failure) is told JSON's kinds, never a Rust type.
    let said = json_words(&err);
    if let Some(field) = quoted_after(&err, "missing field ") {
        return Err(ParseError::MissingField {
            tag,
            at: At::Whole,
            field,
        });
    }
    if let Some(unknown) = quoted_after(&err, "unknown variant ")
        && action == Some(unknown.as_str())
    {
        return Err(ParseError::UnknownAction {
            tag,
            key,
            action: unknown,
            valid: expected_names(&err),
        });
    }
    // A string action is fine (serde would have said so above); taking it away would only change
    // the error to its absence.
    let skip = if action.is_some() { key } else { "" };
    let Some(field) = culprit::<T>(&value, &err, skip, &fields) else {
        return Err(ParseError::Invalid { tag, reason: said });
    };
    match quoted_after(&err, "unknown variant ") {
        Some(value) => Err(ParseError::UnknownValue {
            tag,
            at: At::Whole,
            field,
            value,
            valid: expected_names(&err),
        }),
        None => Err(ParseError::InvalidField {
            tag,
            at: At::Whole,
            field,
            reason: said,
        }),
    }
}

/// serde's message in JSON's words: `expected struct StagePlan` is "expected an object",
/// `a sequence` "an array", `a map` "an object", an enum "one of the values it takes".
fn json_words(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(i) = rest.find("expected ") {
        let (head, tail) = rest.split_at(i + "expected ".len());
        out.push_str(head);
        let (word, after) = if let Some(t) = tail.strip_prefix("struct ") {
            ("an object", skip_name(t))
        } else if let Some(t) = tail.strip_prefix("enum ") {
            ("one of the values it takes", skip_name(t))
        } else if let Some(t) = tail.strip_prefix("a sequence") {
            ("an array", t)
        } else if let Some(t) = tail.strip_prefix("a map") {
            ("an object", t)
        } else {
            ("", tail)
        };
        out.push_str(word);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// What follows a Rust type's name (`StagePlan at line 1` → ` at line 1`).
fn skip_name(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[end..]
}

/// The field whose removal changes the error: serde reports a bad value while it reads the
/// fields, before it checks for missing ones, so without the culprit the error becomes another.
fn culprit<T: DeserializeOwned>(
    value: &Value,
    err: &str,
    skip: &str,
    fields: &impl Fn(&mut Value) -> Option<&mut Map<String, Value>>,
) -> Option<String> {
    let mut probe = value.clone();
    let keys: Vec<String> = fields(&mut probe)?
        .keys()
        .filter(|k| *k != skip)
        .cloned()
        .collect();
    keys.into_iter().find(|key| {
        let mut probe = value.clone();
        if let Some(map) = fields(&mut probe) {
            map.remove(key);
        }
        serde_json::from_value::<T>(probe)
            .map_err(|e| e.to_string())
            .err()
            .as_deref()
            != Some(err)
    })
}

/// The `` `name` `` right after `prefix` at the start of a serde message. Anchored at the start
/// because later parts of the message may quote the model's own text.
fn quoted_after(msg: &str, prefix: &str) -> Option<String> {
    let rest = msg.strip_prefix(prefix)?.strip_prefix('`')?;
    Some(rest[..rest.find('`')?].to_owned())
}

/// The names serde lists after "expected" (`` expected one of `a`, `b` ``), comma-separated.
fn expected_names(msg: &str) -> String {
    let Some(at) = msg.find("expected") else {
        return String::new();
    };
    msg[at..]
        .split('`')
        .skip(1)
        .step_by(2)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serdes_words_become_jsons() {
        assert_eq!(
            json_words("invalid type: string \"x\", expected struct Colleague at line 1"),
            "invalid type: string \"x\", expected an object at line 1"
        );
        assert_eq!(
            json_words("invalid type: string, expected a sequence"),
            "invalid type: string, expected an array"
        );
    }
}
