//! Checks a tool call's arguments against the tool's JSON-Schema `inputSchema` before the call
//! leaves the process, so an agent gets a clear reason ("missing required argument `path`")
//! instead of whatever the server says. A deliberately small subset of JSON Schema: `type`
//! (one or a list), `required`, `properties`, `additionalProperties: false`, `enum` and array
//! `items`; every other keyword is ignored, so the server stays the final judge.

use serde_json::{Map, Value};

/// `Ok` when `args` fit `schema` as far as the subset above can tell; otherwise the first
/// problem, naming the argument (`opts.depth`, `paths[2]` for nested ones).
pub fn check_arguments(schema: &Value, args: &Map<String, Value>) -> Result<(), String> {
    check_object(schema, args, "")
}

fn check_object(schema: &Value, args: &Map<String, Value>, prefix: &str) -> Result<(), String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !args.contains_key(name) {
                return Err(format!("missing required argument `{prefix}{name}`"));
            }
        }
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        let known = |k: &str| properties.is_some_and(|p| p.contains_key(k));
        if let Some(extra) = args.keys().find(|k| !known(k)) {
            let mut expected: Vec<&str> = properties
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            expected.sort_unstable();
            return Err(format!(
                "unknown argument `{prefix}{extra}` (expected one of: {})",
                if expected.is_empty() {
                    "none".to_owned()
                } else {
                    expected.join(", ")
                }
            ));
        }
    }
    if let Some(properties) = properties {
        for (name, value) in args {
            if let Some(sub) = properties.get(name) {
                check_value(sub, value, &format!("{prefix}{name}"))?;
            }
        }
    }
    Ok(())
}

fn check_value(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
        let wanted: Vec<String> = types.iter().map(|t| with_article(t)).collect();
        return Err(format!(
            "argument `{path}` must be {}, got {}",
            wanted.join(" or "),
            shown(value)
        ));
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let options: Vec<String> = allowed.iter().map(shown).collect();
        return Err(format!(
            "argument `{path}` must be one of {}, got {}",
            options.join(", "),
            shown(value)
        ));
    }
    match value {
        Value::Object(inner) if schema.get("properties").is_some() => {
            check_object(schema, inner, &format!("{path}."))
        }
        Value::Array(items) => match schema.get("items") {
            Some(item_schema) if item_schema.is_object() => {
                for (i, item) in items.iter().enumerate() {
                    check_value(item_schema, item, &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Whether `value` is of the JSON-Schema type `t`; unknown type names accept anything.
fn has_type(value: &Value, t: &str) -> bool {
    match t {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => match value {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn with_article(t: &str) -> String {
    match t {
        "null" => "null".to_owned(),
        "array" | "object" | "integer" => format!("an {t}"),
        _ => format!("a {t}"),
    }
}

/// The value as JSON, cut short so a huge argument does not flood the reason.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "where"},
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "force": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "opts": {"type": "object", "properties": {"depth": {"type": "integer"}}, "required": ["depth"]},
                "unit": {"type": "string", "enum": ["c", "f"]},
                "note": {"type": ["string", "null"]},
                "anything": {"anyOf": [{"type": "string"}, {"type": "number"}]}
            },
            "required": ["path"]
        })
    }

    #[test]
    fn fitting_arguments_pass() {
        let a = args(json!({
            "path": "a.txt", "count": 3, "ratio": 0.5, "force": true, "tags": ["x"],
            "opts": {"depth": 2}, "unit": "c", "note": null, "anything": [1], "extra": 1
        }));
        assert_eq!(check_arguments(&schema(), &a), Ok(()));
        assert_eq!(
            check_arguments(&schema(), &args(json!({"path": "p", "count": 2.0}))),
            Ok(())
        );
    }

    #[test]
    fn a_missing_required_argument_is_named() {
        assert_eq!(
            check_arguments(&schema(), &args(json!({"count": 1}))),
            Err("missing required argument `path`".into())
        );
    }

    #[test]
    fn a_wrong_type_says_what_was_expected_and_what_came() {
        assert_eq!(
            check_arguments(&schema(), &args(json!({"path": "p", "count": "x"}))),
            Err("argument `count` must be an integer, got \"x\"".into())
        );
        assert_eq!(
            check_arguments(&schema(), &args(json!({"path": "p", "count": 1.5}))),
            Err("argument `count` must be an integer, got 1.5".into())
        );
        assert_eq!(
            check_arguments(&schema(), &args(json!({"path": 7}))),
            Err("argument `path` must be a string, got 7".into())
        );
        assert_eq!(
            check_arguments(&schema(), &args(json!({"path": "p", "note": 1}))),
            Err("argument `note` must be a string or null, got 1".into())
        );
        assert!(
            check_arguments(&schema(), &args(json!({"path": "p", "force": "yes"})))
                .unwrap_err()
                .contains("must be a boolean")
        );
    }

    #[test]
    fn nested_objects_and_array_items_are_checked_with_their_path() {
        assert_eq!(
            check_arguments(&schema(), &args(json!({"path": "p", "tags": ["a", 2]}))),
            Err("argument `tags[1]` must be a string, got 2".into())
        );
        assert_eq!(
            check_arguments(&schema(), &args(json!({"path": "p", "opts": {}}))),
            Err("missing required argument `opts.depth`".into())
        );
    }

    #[test]
    fn enum_lists_the_allowed_values() {
        assert_eq!(
            check_arguments(&schema(), &args(json!({"path": "p", "unit": "k"}))),
            Err("argument `unit` must be one of \"c\", \"f\", got \"k\"".into())
        );
    }

    #[test]
    fn additional_properties_false_refuses_unknown_arguments() {
        let mut s = schema();
        s["additionalProperties"] = json!(false);
        assert_eq!(
            check_arguments(&s, &args(json!({"path": "p", "colour": "red"}))),
            Err("unknown argument `colour` (expected one of: anything, count, force, note, opts, path, ratio, tags, unit)".into())
        );
        let empty = json!({"type": "object", "additionalProperties": false});
        assert!(
            check_arguments(&empty, &args(json!({"a": 1})))
                .unwrap_err()
                .contains("expected one of: none")
        );
    }

    #[test]
    fn schemas_without_keywords_accept_anything_and_long_values_are_cut() {
        assert_eq!(
            check_arguments(&json!({}), &args(json!({"a": [1, {"b": 2}]}))),
            Ok(())
        );
        let long = "x".repeat(500);
        let reason =
            check_arguments(&schema(), &args(json!({"path": "p", "count": long}))).unwrap_err();
        assert!(reason.len() < 120 && reason.ends_with('…'), "{reason}");
    }
}
