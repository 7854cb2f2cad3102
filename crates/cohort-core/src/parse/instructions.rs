//! Instructions for the runtime: task_manager's `<task_instruction>` and the `<instruction>` a
//! message may carry (SPEC §5, §6).
//!
//! The shapes are the serde derives of [`TaskInstruction`] and [`Instruction`], so a field added
//! there is read here without a second copy of the schema. This module only forgives what models
//! write differently, and turns serde's errors into ones that name the field.

use super::fields::tagged_json;
use super::{At, JsonKind, ParseError};
use crate::message::{AgentInstruction, AskInfoQuery, TaskInstruction};
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

/// `<task_instruction>{"action": …, …}`. An unknown action is an error that lists the valid ones.
/// `stages` may be a single stage instead of a list.
pub fn task_instruction(text: &str) -> Result<TaskInstruction, ParseError> {
    selected(text, "task_instruction", "action", |map| {
        if let Some(stage @ Value::Object(_)) = map.get_mut("stages") {
            *stage = Value::Array(vec![stage.take()]);
        }
    })
}

/// `<agent_instruction>{"action": "init_new_agent" | "add_task_participant", …}`.
pub fn agent_instruction(text: &str) -> Result<AgentInstruction, ParseError> {
    selected(text, "agent_instruction", "action", |_| {})
}

/// `<ask_info>{"type": …, …}`. A single id where `agent_ids` wants a list is taken as that list.
pub fn ask_info(text: &str) -> Result<AskInfoQuery, ParseError> {
    selected(text, "ask_info", "type", |map| {
        if let Some(id @ Value::String(_)) = map.get_mut("agent_ids") {
            *id = Value::Array(vec![id.take()]);
        }
    })
}

/// A tagged JSON object whose `key` field (`action` or `type`) selects the variant of `T`;
/// `fix` forgives shapes models get wrong before serde reads it.
fn selected<T: DeserializeOwned>(
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
    use crate::ids::AgentId;
    use crate::message::{StagePlan, TaskOutcome};
    use std::collections::BTreeMap;

    fn task(json: &str) -> Result<TaskInstruction, ParseError> {
        task_instruction(&format!("<task_instruction>{json}</task_instruction>"))
    }

    #[test]
    fn a_malformed_field_is_said_in_jsons_words_not_rusts() {
        let err = task(r#"{"action": "add_stage", "task_id": "t", "stages": "draft it"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected an array"), "{err}");
        let err = task(r#"{"action": "add_stage", "task_id": "t", "stages": ["draft it"]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("expected an object") && !err.contains("StagePlan"),
            "{err}"
        );
        assert_eq!(
            json_words("invalid type: string \"x\", expected struct Colleague at line 1"),
            "invalid type: string \"x\", expected an object at line 1"
        );
    }

    #[test]
    fn every_task_action_is_read() {
        match task(r#"{"action": "add_task", "task_name": "诗", "task_intention": "写一首诗 🎋"}"#)
            .unwrap()
        {
            TaskInstruction::AddTask {
                task_name,
                task_intention,
                task_id,
                ..
            } => {
                assert_eq!(
                    (task_name.as_str(), task_intention.as_str()),
                    ("诗", "写一首诗 🎋")
                );
                assert!(!task_id.as_str().is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            task(r#"{"action": "add_stage", "task_id": "t", "stages": [{"stage_intention": "draft", "agent_allocation": {"a": "write"}}]}"#).unwrap(),
            TaskInstruction::AddStage {
                task_id: "t".into(),
                stages: vec![StagePlan {
                    stage_intention: "draft".into(),
                    agent_allocation: BTreeMap::from([(AgentId::from("a"), "write".to_owned())]),
                }],
            }
        );
        assert_eq!(
            task(r#"{"action": "finish_stage", "task_id": "t", "stage_id": "s"}"#).unwrap(),
            TaskInstruction::FinishStage {
                task_id: "t".into(),
                stage_id: "s".into()
            }
        );
        assert_eq!(
            task(r#"{"action": "finish_task", "task_id": "t", "task_summary": "ok", "outcome": "failed"}"#).unwrap(),
            TaskInstruction::FinishTask { task_id: "t".into(), task_summary: "ok".into(), outcome: TaskOutcome::Failed }
        );
        assert_eq!(
            task(r#"{"action": "retry_stage", "task_id": "t", "stage_id": "s", "stage_intention": null, "agent_allocation": {"b": "fix"}}"#).unwrap(),
            TaskInstruction::RetryStage {
                task_id: "t".into(),
                stage_id: "s".into(),
                stage_intention: None,
                agent_allocation: BTreeMap::from([(AgentId::from("b"), "fix".to_owned())]),
            }
        );
    }

    #[test]
    fn a_noisy_task_instruction_is_read() {
        let text = "I'll close the stage.\n```json\n<task_instruction>\n{\n  'action': 'Finish-Stage', // done\n  \
                    'task_id': 't1', 'stage_id': 's1', 'extra': None,\n}\n</task_instruction>\n```";
        assert_eq!(
            task_instruction(text).unwrap(),
            TaskInstruction::FinishStage {
                task_id: "t1".into(),
                stage_id: "s1".into()
            }
        );
        let text = "Format: <task_instruction>{\"action\": \"...\"}</task_instruction>\n\
                    <task_instruction>[{\"action\": \"add_task\", \"task_id\": null, \"task_intention\": \"x\"}]";
        assert!(matches!(
            task_instruction(text).unwrap(),
            TaskInstruction::AddTask { .. }
        ));
        let one_stage = r#"{"action": "add_stage", "task_id": "t", "stages": {"stage_intention": "x", "agent_allocation": {}}}"#;
        assert!(
            matches!(task(one_stage).unwrap(), TaskInstruction::AddStage { stages, .. } if stages.len() == 1)
        );
    }

    #[test]
    fn broken_task_instructions_say_what_is_wrong() {
        let err = |json: &str| task(json).unwrap_err().to_string();
        assert_eq!(
            err(r#"{"action": "dance"}"#),
            "<task_instruction> has unknown action `dance`; valid actions: add_task, add_stage, finish_stage, finish_task, retry_stage"
        );
        assert_eq!(
            err(r#"{"task_id": "t"}"#),
            "<task_instruction> field `action` is missing"
        );
        assert_eq!(
            err(r#"{"action": "finish_stage", "task_id": "t"}"#),
            "<task_instruction> field `stage_id` is missing"
        );
        assert_eq!(
            err(r#"{"action": "finish_stage", "task_id": 3, "stage_id": "s"}"#),
            "<task_instruction> field `task_id` is invalid: invalid type: integer `3`, expected a string"
        );
        assert_eq!(
            err(
                r#"{"action": "add_stage", "task_id": "t", "stages": [{"stage_intention": "x", "agent_allocation": {}}, {"stage_intention": "y"}]}"#
            ),
            "<task_instruction> field `agent_allocation` is missing"
        );
        assert!(
            err(r#"{"action": "retry_stage", "task_id": "t", "stage_id": "s", "agent_allocation": ["a"]}"#)
                .starts_with("<task_instruction> field `agent_allocation` is invalid: invalid type: sequence")
        );
        assert_eq!(
            err(r#"{"action": "finish_task", "task_id": "t", "outcome": "won"}"#),
            "<task_instruction> field `outcome` has unknown value `won`; valid values: finished, failed"
        );
        // The model's own text inside serde's message must not be taken for serde's words.
        assert_eq!(
            err(
                r#"{"action": "retry_stage", "task_id": "t", "stage_id": "s", "agent_allocation": "missing field `x`"}"#
            ),
            "<task_instruction> field `agent_allocation` is invalid: invalid type: string \"missing field `x`\", expected an object"
        );
        assert_eq!(
            err("[1]"),
            "<task_instruction> should be a JSON object, found a list"
        );
        assert_eq!(
            task_instruction("no tag").unwrap_err().to_string(),
            "the answer has no <task_instruction> tag"
        );
    }

    #[test]
    fn agent_instructions_are_read_with_forgiving_action_names() {
        let i = agent_instruction(r#"<agent_instruction>{"action": "Init-New-Agent", "template": "analyst", "agent_id": "ana", "name": null}</agent_instruction>"#).unwrap();
        assert_eq!(
            i,
            AgentInstruction::InitNewAgent {
                template: "analyst".into(),
                agent_id: "ana".into(),
                name: None
            }
        );
        let i = agent_instruction(r#"<agent_instruction>[{"action": "add_task_participant", "task_id": "t", "agent_id": "a"}]</agent_instruction>"#).unwrap();
        assert_eq!(
            i,
            AgentInstruction::AddTaskParticipant {
                task_id: "t".into(),
                agent_id: "a".into()
            }
        );
        let e =
            agent_instruction(r#"<agent_instruction>{"action": "fire_agent"}</agent_instruction>"#)
                .unwrap_err();
        assert!(e.to_string().contains("init_new_agent"), "{e}");
        let e = agent_instruction(r#"<agent_instruction>{"action": "init_new_agent", "agent_id": "x"}</agent_instruction>"#).unwrap_err();
        assert!(e.to_string().contains("template"), "{e}");
    }

    #[test]
    fn every_ask_info_type_is_read() {
        let q = |json: &str| ask_info(&format!("<ask_info>{json}</ask_info>"));
        for (json, want) in [
            (r#"{"type": "managed_tasks"}"#, AskInfoQuery::ManagedTasks),
            (r#"{"type": "joined_tasks"}"#, AskInfoQuery::JoinedTasks),
            (
                r#"{"type": "task", "task_id": "t"}"#,
                AskInfoQuery::Task {
                    task_id: "t".into(),
                },
            ),
            (
                r#"{"type": "stage", "stage_id": "s"}"#,
                AskInfoQuery::Stage {
                    task_id: None,
                    stage_id: "s".into(),
                },
            ),
            (
                r#"{"type": "Agent Templates"}"#,
                AskInfoQuery::AgentTemplates,
            ),
            (
                r#"{"type": "all_agent_profiles"}"#,
                AskInfoQuery::AllAgentProfiles,
            ),
            (r#"{"type": "team_profiles"}"#, AskInfoQuery::TeamProfiles),
            (
                r#"{"type": "task_group_profiles", "task_id": "t"}"#,
                AskInfoQuery::TaskGroupProfiles {
                    task_id: "t".into(),
                },
            ),
            (
                r#"{"type": "stage_profiles", "task_id": "t", "stage_id": "s"}"#,
                AskInfoQuery::StageProfiles {
                    task_id: Some("t".into()),
                    stage_id: "s".into(),
                },
            ),
            (
                r#"{"type": "agent_states", "agent_ids": "a"}"#,
                AskInfoQuery::AgentStates {
                    agent_ids: vec!["a".into()],
                },
            ),
            (
                r#"{"type": "skills_and_tools"}"#,
                AskInfoQuery::SkillsAndTools,
            ),
        ] {
            assert_eq!(q(json).unwrap(), want, "{json}");
        }
        let e = q(r#"{"type": "weather"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown type `weather`"), "{e}");
        assert!(e.to_string().contains("skills_and_tools"), "{e}");
        let e = q(r#"{"type": "task"}"#).unwrap_err();
        assert!(e.to_string().contains("task_id"), "{e}");
        assert!(
            q(r#"{"task_id": "t"}"#)
                .unwrap_err()
                .to_string()
                .contains("type")
        );
    }
}
