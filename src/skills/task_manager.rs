//! task_manager: a `<task_instruction>` for SyncState (add_task, add_stage, finish_stage,
//! finish_task, retry_stage). A new task's id is chosen here, so the step records it.

use super::{SkillError, SkillOutcome, working};
use crate::ids::TaskId;
use crate::message::TaskInstruction;
use crate::parse;
use serde_json::json;

/// `check_stages`: an `add_stage` waits for a person's check (see `agent::plan_check`)
/// instead of going to SyncState.
pub fn interpret(answer: &str, check_stages: bool) -> Result<SkillOutcome, SkillError> {
    let mut instruction = parse::task_instruction(answer)?;
    if let TaskInstruction::AddTask {
        task_id,
        task_name,
        task_intention,
    } = &mut instruction
    {
        if task_intention.trim().is_empty() {
            return Err(SkillError::Invalid(
                "add_task needs a task_intention".into(),
            ));
        }
        // Never trust a model-made id for a new task: it could collide with an existing one.
        *task_id = TaskId::random();
        if task_name.trim().is_empty() {
            *task_name = task_intention.chars().take(48).collect();
        }
    }
    if let TaskInstruction::AddStage { stages, task_id } = &instruction {
        if stages.is_empty() {
            return Err(SkillError::Invalid("add_stage lists no stages".into()));
        }
        if check_stages {
            let check =
                crate::agent::plan_check::PlanCheck::of_stages(task_id.clone(), stages.clone());
            return Ok(working(json!({
                "task_instruction": instruction,
                crate::agent::plan_check::KEY: check,
            })));
        }
    }
    Ok(SkillOutcome {
        task_instruction: Some(instruction.clone()),
        ..working(json!({ "task_instruction": instruction }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_task_gets_a_fresh_id_and_a_name() {
        let o = interpret(r#"<task_instruction>{"action": "add_task", "task_id": "t1", "task_intention": "write a poem"}</task_instruction>"#, false).unwrap();
        match o.task_instruction.unwrap() {
            TaskInstruction::AddTask {
                task_id, task_name, ..
            } => {
                assert_ne!(task_id.as_str(), "t1");
                assert_eq!(task_name, "write a poem");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(o.result["task_instruction"]["action"], "add_task");
    }

    #[test]
    fn empty_stage_lists_and_unknown_actions_fail() {
        assert!(interpret(r#"<task_instruction>{"action": "add_stage", "task_id": "t", "stages": []}</task_instruction>"#, false).is_err());
        assert!(
            interpret(
                r#"<task_instruction>{"action": "explode"}</task_instruction>"#,
                false
            )
            .is_err()
        );
    }
}
