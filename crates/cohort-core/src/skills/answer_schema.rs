//! The JSON schema of a skill's answer, for endpoints that can constrain a model by one
//! (`response_format: json_schema`): an object with one property per answer tag (SPEC §7), and
//! what may be chosen (executors, actions, query types) given as enums of what this agent may
//! actually use at this step, so a constrained model cannot name a skill it lacks.
//!
//! The provider turns a constrained answer back into tagged text
//! ([`crate::call::structured::tagged_answer`]), so the
//! skills read one format whichever way the model was asked.
//!
//! Each skill's schema is in its folder (`skills/<name>/schema.rs`); here are the dispatch and
//! the pieces they share.

use crate::state::{Agent, Skill, StepState};
use serde_json::{Map, Value, json};

/// The most agents a message's receiver may be chosen from by name; a larger team leaves it
/// free (an enum of thousands would cost more prompt than it saves).
pub const RECEIVERS_LISTED: usize = 64;

/// Whether `skill`'s answer is worth constraining. A free text (a thought, a summary) gains
/// nothing from a schema, and loses the work: constrained to `{"think": "…"}`, Qwen2.5 1.5B
/// handed back its instruction 3 times in 3 where, asked for the tag, it wrote the poem 3 times
/// in 3 (the same prompt, three temperatures). Its tag format is read as well either way.
pub fn constrained(skill: Skill) -> bool {
    skill.kind().constrained()
}

/// The schema of `skill`'s answer for `agent` running `step` (the skill's
/// [`SkillKind::answer_schema`](super::SkillKind::answer_schema), in its folder). `agents` are
/// the team's agents (a message's possible receivers) when there are at most
/// [`RECEIVERS_LISTED`] of them.
pub fn answer_schema(skill: Skill, agent: &Agent, step: &StepState, agents: &[String]) -> Value {
    skill.kind().answer_schema(agent, step, agents)
}

/// An answer object: the required tags, the optional ones, and the optional memory block every
/// skill may add.
pub(crate) fn answer(required: &[(&str, Value)], optional: &[(&str, Value)]) -> Value {
    let mut properties = Map::new();
    for (key, schema) in required.iter().chain(optional) {
        properties.insert((*key).to_owned(), schema.clone());
    }
    properties.insert("persistent_memory".into(), memory());
    let required: Vec<&str> = required.iter().map(|(k, _)| *k).collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// A text the parsers want to be there: never empty, and bounded, so a small model that starts
/// repeating itself stops at the bound instead of at its token limit.
pub(crate) fn text() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": TEXT_CHARS })
}

/// A name, an id or an intention: one short line.
pub(crate) fn line() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": LINE_CHARS })
}

/// The longest text an answer's field may hold, in characters.
pub const TEXT_CHARS: usize = 2_000;
/// The longest name, id or intention, in characters.
pub const LINE_CHARS: usize = 200;

/// A closed object with these properties, `required` of them required.
pub(crate) fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn memory() -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": { "add": text(), "delete": line() },
            "minProperties": 1,
            "additionalProperties": false,
        },
    })
}

/// A step the model asks for (`<get_more_info>`, `<react_action>`).
pub(crate) fn step_request() -> Value {
    object(
        json!({ "step_intention": line(), "text_content": text() }),
        &["step_intention", "text_content"],
    )
}

/// One variant of an instruction selected by `key` (`action` or `type`).
pub(crate) fn variant(key: &str, name: &str, fields: Value, required: &[&str]) -> Value {
    let mut properties = fields.as_object().cloned().unwrap_or_default();
    properties.insert(key.into(), json!({ "type": "string", "enum": [name] }));
    let mut all = vec![key];
    all.extend_from_slice(required);
    object(Value::Object(properties), &all)
}

/// Every name an `enum` of `schema` offers, depth first (for the schemas' tests).
#[cfg(test)]
pub(crate) fn enums(schema: &Value, into: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Array(names)) = map.get("enum") {
                into.extend(names.iter().filter_map(|n| n.as_str().map(str::to_owned)));
            }
            map.values().for_each(|v| enums(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| enums(v, into)),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
