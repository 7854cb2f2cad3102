//! Ask: a structured question to a person (seed 001's Plan Ask): free text, a choice among
//! options (one, or several with `multiple`), or a form of typed fields (text, a longer text,
//! number, yes/no, a choice; each with its description, default and length), and how a
//! person's answer is checked against it, so the agent gets options it offered or a form whose
//! fields have the types it asked for.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The most options a choice may have (and fields a form an agent writes).
pub const MAX_CHOICES: usize = 12;
/// The most fields any form may have (a tool's server may send a longer one than an agent
/// writes).
pub const MAX_FIELDS: usize = 24;
/// The longest option, key or label, in characters.
const MAX_LABEL_CHARS: usize = 200;
/// The longest text a person may give in one answer or field, in characters.
const MAX_ANSWER_CHARS: usize = 8_000;

/// What kind of answer a question wants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum Ask {
    /// Free text.
    Text,
    /// One of `options`, or with `multiple` one or more of them (the answer a JSON list).
    Select {
        /// The choices offered, in order.
        options: Vec<AskOption>,
        /// Several may be chosen (seed 001's multi-select).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        multiple: bool,
    },
    /// A JSON object with these fields.
    Form {
        /// The form's fields, in order.
        fields: Vec<AskField>,
    },
}

/// One option of a choice (seed 001's options with keys): the answer it gives (`key`) and
/// what the person reads (`label`; the key when empty). On the wire a plain string is an option
/// whose key and label are that string; `{"key", "label"}` gives both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AskOption {
    /// What the answer is when the option is chosen.
    pub key: String,
    /// What the person reads; the key when empty.
    pub label: String,
}

impl AskOption {
    /// What the person reads.
    pub fn label(&self) -> &str {
        if self.label.is_empty() {
            &self.key
        } else {
            &self.label
        }
    }

    /// As listed for a person or a model: `key`, or `key (label)` when they differ.
    fn listed(&self) -> String {
        if self.label() == self.key {
            self.key.clone()
        } else {
            format!("{} ({})", self.key, self.label)
        }
    }
}

impl Serialize for AskOption {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.label() == self.key {
            return s.serialize_str(&self.key);
        }
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("key", &self.key)?;
        m.serialize_entry("label", &self.label)?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for AskOption {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged, expecting = "an option: a text, or {\"key\", \"label\"}")]
        enum Raw {
            Plain(String),
            Keyed {
                key: String,
                #[serde(default)]
                label: String,
            },
        }
        Ok(match Raw::deserialize(d)? {
            Raw::Plain(key) => AskOption {
                key,
                label: String::new(),
            },
            Raw::Keyed { key, label } => AskOption { key, label },
        })
    }
}

/// One field of a form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskField {
    /// The field's key in the answer object.
    pub key: String,
    /// What the person reads beside the field; the key when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// The type its value must have (`type` on the wire).
    #[serde(rename = "type", default)]
    pub kind: FieldKind,
    /// Whether an answer must fill it.
    #[serde(default)]
    pub required: bool,
    /// The allowed values of a `select` field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Bounds of a `number` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Upper bound of a `number` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// What the field holds when a person leaves it empty (the form shows it filled in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// What the field is for, shown under it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The most characters a `text` or `textarea` field's value may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
}

/// The type of a form field's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    /// A string, on a line.
    #[default]
    Text,
    /// A string of several lines.
    Textarea,
    /// A number, within the field's bounds if it has them.
    Number,
    /// `true` or `false`.
    Boolean,
    /// One of the field's options.
    Select,
}

/// Why a question cannot be asked, or why a person's answer does not fit it.
#[derive(Debug, thiserror::Error, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum AskError {
    /// A choice has too few, too many, empty or repeated options.
    #[error("{}", crate::texts::Texts::english().ask_bad_options(MAX_CHOICES))]
    BadOptions,
    /// A form has no fields, too many, or empty or repeated keys.
    #[error("{}", crate::texts::Texts::english().ask_bad_fields(MAX_CHOICES))]
    BadFields,
    /// A select field (named) has fewer than two options.
    #[error("{}", crate::texts::Texts::english().ask_field_options(.0))]
    FieldOptions(String),
    /// A number field (named) has its min above its max.
    #[error("{}", crate::texts::Texts::english().ask_bad_bounds(.0))]
    BadBounds(String),
    /// An option, key or label is too long.
    #[error("{}", crate::texts::Texts::english().ask_too_long(MAX_LABEL_CHARS))]
    TooLong,
    /// The answer is empty.
    #[error("the answer is empty")]
    Empty,
    /// The answer is over the length an answer may have.
    #[error("the answer is longer than {MAX_ANSWER_CHARS} characters")]
    AnswerTooLong,
    /// A choice was answered with something not offered (the options listed).
    #[error("the answer must be one of the options: {0}")]
    NotAnOption(String),
    /// A form was answered with something other than a JSON object (why).
    #[error("the answer to a form must be a JSON object of its fields: {0}")]
    NotAForm(String),
    /// A form field's value does not fit it.
    #[error("form field `{field}`: {why}")]
    BadField {
        /// The field's key.
        field: String,
        /// What is wrong with its value.
        why: String,
    },
}

impl AskError {
    /// Why a question cannot be asked, in the language of `t`: the model that wrote it reads
    /// this. The faults of a person's answer (which [`Ask::check`] never gives) are told to
    /// the person in English, as the REST API's errors are.
    pub fn render_question(&self, t: &crate::texts::Texts) -> String {
        match self {
            AskError::BadOptions => t.ask_bad_options(MAX_CHOICES),
            AskError::BadFields => t.ask_bad_fields(MAX_CHOICES),
            AskError::FieldOptions(field) => t.ask_field_options(field),
            AskError::BadBounds(field) => t.ask_bad_bounds(field),
            AskError::TooLong => t.ask_too_long(MAX_LABEL_CHARS),
            answer => answer.to_string(),
        }
    }
}

impl Ask {
    /// Whether the question can be answered at all (options and fields well-formed).
    pub fn check(&self) -> Result<(), AskError> {
        match self {
            Ask::Text => Ok(()),
            Ask::Select { options, .. } => {
                if options
                    .iter()
                    .any(|o| o.label.chars().count() > MAX_LABEL_CHARS)
                {
                    return Err(AskError::TooLong);
                }
                check_options(&keys_of(options)).ok_or(AskError::BadOptions)?
            }
            Ask::Form { fields } => {
                let mut keys: Vec<&str> = fields.iter().map(|f| f.key.trim()).collect();
                keys.sort_unstable();
                keys.dedup();
                if fields.is_empty()
                    || fields.len() > MAX_FIELDS
                    || keys.len() != fields.len()
                    || keys.contains(&"")
                {
                    return Err(AskError::BadFields);
                }
                for f in fields {
                    if f.key.chars().count() > MAX_LABEL_CHARS
                        || f.label.chars().count() > MAX_LABEL_CHARS
                        || f.description.chars().count() > MAX_ANSWER_CHARS
                    {
                        return Err(AskError::TooLong);
                    }
                    if f.max_length == Some(0) {
                        return Err(AskError::BadBounds(f.key.clone()));
                    }
                    if f.min.zip(f.max).is_some_and(|(lo, hi)| lo > hi) {
                        return Err(AskError::BadBounds(f.key.clone()));
                    }
                    if f.kind == FieldKind::Select {
                        check_options(&f.options)
                            .ok_or_else(|| AskError::FieldOptions(f.key.clone()))??;
                    }
                }
                Ok(())
            }
        }
    }

    /// A person's `answer`, checked against the question and put in its canonical form: the
    /// text, the option chosen (matched without regard to case or surrounding blanks), or the
    /// form's fields as a compact JSON object of typed values.
    pub fn answer(&self, answer: &str) -> Result<String, AskError> {
        let answer = answer.trim();
        if answer.is_empty() {
            return Err(AskError::Empty);
        }
        if answer.chars().count() > MAX_ANSWER_CHARS {
            return Err(AskError::AnswerTooLong);
        }
        match self {
            Ask::Text => Ok(answer.to_owned()),
            Ask::Select {
                options,
                multiple: false,
            } => pick(options, answer).ok_or_else(|| AskError::NotAnOption(listed(options))),
            Ask::Select {
                options,
                multiple: true,
            } => choose_several(options, answer),
            Ask::Form { fields } => {
                let given: Map<String, Value> = match serde_json::from_str(answer) {
                    Ok(Value::Object(m)) => m,
                    Ok(_) => return Err(AskError::NotAForm("it is not an object".into())),
                    Err(e) => return Err(AskError::NotAForm(e.to_string())),
                };
                if let Some(k) = given.keys().find(|k| !fields.iter().any(|f| &f.key == *k)) {
                    return Err(AskError::BadField {
                        field: k.clone(),
                        why: "the form has no such field".into(),
                    });
                }
                let mut out = Map::new();
                for f in fields {
                    if let Some(v) = f.value(given.get(&f.key))? {
                        out.insert(f.key.clone(), v);
                    }
                }
                Ok(Value::Object(out).to_string())
            }
        }
    }

    /// One line for a person: what kind of answer is wanted.
    pub fn describe(&self, t: &crate::texts::Texts) -> String {
        match self {
            Ask::Text => t.ask_text(),
            Ask::Select {
                options,
                multiple: false,
            } => t.ask_select_one(listed(options)),
            Ask::Select {
                options,
                multiple: true,
            } => t.ask_select_many(listed(options)),
            Ask::Form { fields } => {
                let list: Vec<String> = fields
                    .iter()
                    .map(|f| {
                        let need = if f.required {
                            t.ask_required()
                        } else {
                            String::new()
                        };
                        let kind = format!("{:?}", f.kind).to_lowercase();
                        t.ask_field(&f.key, kind, need)
                    })
                    .collect();
                t.ask_form(list.join(", "))
            }
        }
    }
}

impl AskField {
    /// The field's checked value from `v` (`None`: left empty and not required).
    fn value(&self, v: Option<&Value>) -> Result<Option<Value>, AskError> {
        let bad = |why: String| AskError::BadField {
            field: self.key.clone(),
            why,
        };
        let v = match v {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.trim().is_empty() => None,
            Some(v) => Some(v),
        };
        // Left empty: the field's default, checked as any value is.
        let v = v.or(self.default.as_ref());
        let Some(v) = v else {
            return if self.required {
                Err(bad("it is required".into()))
            } else {
                Ok(None)
            };
        };
        let value = match self.kind {
            FieldKind::Text | FieldKind::Textarea => {
                let text = match v {
                    // Kept exactly as given: a field may be a tool's argument (a file's content).
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => return Err(bad("it must be text".into())),
                };
                let most = self
                    .max_length
                    .unwrap_or(MAX_ANSWER_CHARS)
                    .min(MAX_ANSWER_CHARS);
                if text.chars().count() > most {
                    return Err(bad(format!("it may be at most {most} characters long")));
                }
                Value::String(text)
            }
            FieldKind::Number => {
                let n = match v {
                    Value::Number(n) => n.as_f64(),
                    Value::String(s) => s.trim().parse::<f64>().ok(),
                    _ => None,
                }
                .filter(|n| n.is_finite())
                .ok_or_else(|| bad("it must be a number".into()))?;
                if self.min.is_some_and(|m| n < m) || self.max.is_some_and(|m| n > m) {
                    return Err(bad(format!(
                        "it must lie from {} to {}",
                        self.min.map_or("any".into(), |m| m.to_string()),
                        self.max.map_or("any".into(), |m| m.to_string())
                    )));
                }
                serde_json::Number::from_f64(n).map_or(Value::Null, |x| {
                    // Whole numbers stay whole (3, not 3.0).
                    if n.fract() == 0.0 && n.abs() < 9e15 {
                        Value::from(n as i64)
                    } else {
                        Value::Number(x)
                    }
                })
            }
            FieldKind::Boolean => match v {
                Value::Bool(b) => Value::Bool(*b),
                Value::String(s) if matches!(s.trim(), "true" | "yes") => Value::Bool(true),
                Value::String(s) if matches!(s.trim(), "false" | "no") => Value::Bool(false),
                _ => return Err(bad("it must be true or false".into())),
            },
            FieldKind::Select => {
                let s = v.as_str().map(str::trim).unwrap_or_default();
                Value::String(choose(&self.options, s).ok_or_else(|| {
                    bad(format!("it must be one of: {}", self.options.join(" | ")))
                })?)
            }
        };
        Ok(Some(value))
    }
}

/// `Some(Ok)` when the options can be chosen from, `Some(Err)` when one is too long, `None`
/// when there are too few, too many, blank or repeated ones.
fn check_options(options: &[String]) -> Option<Result<(), AskError>> {
    let mut seen: Vec<String> = options.iter().map(|o| o.trim().to_lowercase()).collect();
    seen.sort_unstable();
    seen.dedup();
    if options.len() < 2
        || options.len() > MAX_CHOICES
        || seen.len() != options.len()
        || seen.iter().any(String::is_empty)
    {
        return None;
    }
    if options.iter().any(|o| o.chars().count() > MAX_LABEL_CHARS) {
        return Some(Err(AskError::TooLong));
    }
    Some(Ok(()))
}

/// The options a multi-select `answer` chose: a JSON list of them (or one option alone), each
/// offered (by key or label), at least one; the canonical answer is the JSON list of their
/// keys, in the order the options were offered.
fn choose_several(options: &[AskOption], answer: &str) -> Result<String, AskError> {
    let not_one = |a: &str| AskError::NotAnOption(format!("{a} is not one of {}", listed(options)));
    let given: Vec<String> = match serde_json::from_str::<Value>(answer) {
        Ok(Value::Array(items)) => items
            .into_iter()
            .map(|i| match i {
                Value::String(s) => Ok(s),
                other => Err(not_one(&other.to_string())),
            })
            .collect::<Result<_, _>>()?,
        _ => vec![answer.to_owned()],
    };
    let mut chosen = Vec::new();
    for g in &given {
        chosen.push(pick(options, g).ok_or_else(|| not_one(g))?);
    }
    if chosen.is_empty() {
        return Err(AskError::Empty);
    }
    let picked: Vec<&str> = options
        .iter()
        .filter(|o| chosen.contains(&o.key))
        .map(|o| o.key.as_str())
        .collect();
    Ok(serde_json::to_string(&picked).unwrap_or_default())
}

/// The key of the option `answer` names, by its key or its label (without regard to case or
/// surrounding blanks).
fn pick(options: &[AskOption], answer: &str) -> Option<String> {
    let a = answer.trim();
    options
        .iter()
        .find(|o| o.key.trim().eq_ignore_ascii_case(a))
        .or_else(|| {
            options
                .iter()
                .find(|o| o.label().trim().eq_ignore_ascii_case(a))
        })
        .map(|o| o.key.clone())
}

fn keys_of(options: &[AskOption]) -> Vec<String> {
    options.iter().map(|o| o.key.clone()).collect()
}

/// The options as a person or a model reads them in one line.
fn listed(options: &[AskOption]) -> String {
    options
        .iter()
        .map(AskOption::listed)
        .collect::<Vec<_>>()
        .join(" | ")
}

fn choose(options: &[String], answer: &str) -> Option<String> {
    options
        .iter()
        .find(|o| o.trim().eq_ignore_ascii_case(answer.trim()))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(v: Value) -> Ask {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_choice_takes_one_of_its_options_only() {
        let a = ask(json!({"mode": "select", "options": ["Tea", "Coffee"]}));
        a.check().unwrap();
        assert_eq!(a.answer("  coffee ").unwrap(), "Coffee");
        assert_eq!(
            a.answer("water").unwrap_err(),
            AskError::NotAnOption("Tea | Coffee".into())
        );
        assert_eq!(a.answer(" ").unwrap_err(), AskError::Empty);
        for bad in [json!(["one"]), json!(["a", "A"]), json!(["a", " "])] {
            let a = ask(json!({"mode": "select", "options": bad}));
            assert_eq!(a.check().unwrap_err(), AskError::BadOptions, "{a:?}");
        }
    }

    #[test]
    fn a_form_checks_each_field_and_answers_with_typed_values() {
        let a = ask(json!({"mode": "form", "fields": [
            {"key": "city", "required": true},
            {"key": "nights", "type": "number", "min": 1, "max": 14, "required": true},
            {"key": "breakfast", "type": "boolean"},
            {"key": "room", "type": "select", "options": ["single", "double"]},
        ]}));
        a.check().unwrap();
        let got = a
            .answer(r#"{"city": "Oslo", "nights": "3", "breakfast": "yes", "room": "Double"}"#)
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&got).unwrap(),
            json!({"city": "Oslo", "nights": 3, "breakfast": true, "room": "double"})
        );
        // Optional fields may stay empty.
        assert_eq!(
            a.answer(r#"{"city": "Oslo", "nights": 2.5}"#).unwrap(),
            r#"{"city":"Oslo","nights":2.5}"#
        );
        let why = |s: &str| a.answer(s).unwrap_err().to_string();
        assert!(why(r#"{"nights": 3}"#).contains("`city`: it is required"));
        assert!(why(r#"{"city": "x", "nights": 30}"#).contains("from 1 to 14"));
        assert!(why(r#"{"city": "x", "nights": "many"}"#).contains("a number"));
        assert!(why(r#"{"city": "x", "nights": 1, "pool": true}"#).contains("no such field"));
        assert!(why(r#"{"city": "x", "nights": 1, "room": "suite"}"#).contains("single | double"));
        assert!(why("three nights in Oslo").contains("JSON object"));
    }

    #[test]
    fn a_multi_select_takes_one_or_more_of_its_options_as_a_list() {
        let a =
            ask(json!({"mode": "select", "options": ["Tea", "Coffee", "Water"], "multiple": true}));
        a.check().unwrap();
        assert_eq!(
            a.answer(r#"["water", " TEA"]"#).unwrap(),
            r#"["Tea","Water"]"#
        );
        assert_eq!(a.answer("coffee").unwrap(), r#"["Coffee"]"#, "one alone");
        assert_eq!(a.answer("[]").unwrap_err(), AskError::Empty);
        assert!(
            a.answer(r#"["Tea", "milk"]"#)
                .unwrap_err()
                .to_string()
                .contains("milk")
        );
        assert!(
            a.describe(&crate::texts::Texts::english())
                .contains("one or more")
        );
    }

    #[test]
    fn an_option_may_have_a_key_apart_from_what_the_person_reads() {
        let a = ask(json!({"mode": "select", "options": [
            {"key": "s", "label": "Spring: blossoms"}, "Summer", {"key": "a"}]}));
        a.check().unwrap();
        assert_eq!(a.answer("spring: BLOSSOMS").unwrap(), "s", "by its label");
        assert_eq!(a.answer("S").unwrap(), "s", "by its key");
        assert_eq!(a.answer("a").unwrap(), "a");
        assert!(
            a.describe(&crate::texts::Texts::english())
                .contains("s (Spring: blossoms) | Summer | a"),
            "{}",
            a.describe(&crate::texts::Texts::english())
        );
        // A plain option stays a plain string on the wire.
        assert_eq!(
            serde_json::to_value(&a).unwrap()["options"],
            json!([{"key": "s", "label": "Spring: blossoms"}, "Summer", "a"])
        );
        let twice = ask(json!({"mode": "select", "options": [{"key": "x", "label": "A"}, "x"]}));
        assert_eq!(
            twice.check().unwrap_err(),
            AskError::BadOptions,
            "keys differ"
        );
    }

    #[test]
    fn a_form_field_may_be_a_longer_text_with_a_description_and_a_length() {
        let a = ask(json!({"mode": "form", "fields": [
            {"key": "note", "type": "textarea", "description": "What to tell the team", "max_length": 10},
            {"key": "name", "max_length": 3, "default": "Ada"},
        ]}));
        a.check().unwrap();
        let got = a.answer(r#"{"note": "two\nlines"}"#).unwrap();
        assert_eq!(got, r#"{"name":"Ada","note":"two\nlines"}"#);
        let why = a
            .answer(r#"{"note": "far too long a note"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("`note`: it may be at most 10 characters long"),
            "{why}"
        );
        let zero = ask(json!({"mode": "form", "fields": [{"key": "x", "max_length": 0}]}));
        assert_eq!(zero.check().unwrap_err(), AskError::BadBounds("x".into()));
    }

    #[test]
    fn a_malformed_form_is_refused_before_anyone_sees_it() {
        let no_fields = ask(json!({"mode": "form", "fields": []}));
        assert_eq!(no_fields.check().unwrap_err(), AskError::BadFields);
        let twice = ask(json!({"mode": "form", "fields": [{"key": "a"}, {"key": "a"}]}));
        assert_eq!(twice.check().unwrap_err(), AskError::BadFields);
        let select = ask(json!({"mode": "form", "fields": [{"key": "a", "type": "select"}]}));
        assert_eq!(
            select.check().unwrap_err(),
            AskError::FieldOptions("a".into())
        );
        assert!(serde_json::from_value::<Ask>(json!({"mode": "poll"})).is_err());
        assert_eq!(
            ask(json!({"mode": "text"})).answer(" fine ").unwrap(),
            "fine"
        );
    }
}
