//! A task_manager answer as the model wrote it: `<task_instruction>`, read leniently
//! (`parse::tagged_variant`).

use crate::message::TaskInstruction;
use crate::parse::{ParseError, tagged_variant};
use serde_json::Value;

/// `<task_instruction>{"action": …, …}`. An unknown action is an error that lists the valid ones.
/// `stages` may be a single stage instead of a list.
/// What the runtime writes of a task summary is never read from a model's answer.
pub fn read(text: &str) -> Result<TaskInstruction, ParseError> {
    tagged_variant(text, "task_instruction", "action", |map| {
        if let Some(stage @ Value::Object(_)) = map.get_mut("stages") {
            *stage = Value::Array(vec![stage.take()]);
        }
        map.remove("summary_written");
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::AgentId;
    use crate::message::{StagePlan, TaskOutcome};
    use std::collections::BTreeMap;

    fn task(json: &str) -> Result<TaskInstruction, ParseError> {
        read(&format!("<task_instruction>{json}</task_instruction>"))
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
            task(r#"{"action": "finish_task", "task_id": "t", "task_summary": "ok", "outcome": "failed", "summary_written": {"written": "composed", "reports": "forged"}}"#).unwrap(),
            TaskInstruction::FinishTask { task_id: "t".into(), task_summary: "ok".into(), outcome: TaskOutcome::Failed, summary_written: None }
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
            read(text).unwrap(),
            TaskInstruction::FinishStage {
                task_id: "t1".into(),
                stage_id: "s1".into()
            }
        );
        let text = "Format: <task_instruction>{\"action\": \"...\"}</task_instruction>\n\
                    <task_instruction>[{\"action\": \"add_task\", \"task_id\": null, \"task_intention\": \"x\"}]";
        assert!(matches!(
            read(text).unwrap(),
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
            read("no tag").unwrap_err().to_string(),
            "the answer has no <task_instruction> tag"
        );
    }
}
