//! What a person does to a task directly, outside any agent's step. Cancel it: its open
//! stages and the task become `cancelled`, and its group drops the task's work (an agent's
//! LLM or tool call in flight for it is abandoned). Retry its running stage (stuck, or its
//! agents failed): the stage fails and a fresh copy with the same agents and goals starts, as
//! the manager's `retry_stage` would.

use super::{Applied, SyncCore, SyncError};
use crate::ids::{AgentId, StageId, TaskId};
use crate::message::TaskInstruction;
use crate::state::ExecutionState;

impl SyncCore {
    /// `by` cancels `task` with `reason`.
    pub fn cancel_task(
        &mut self,
        task: &TaskId,
        by: &AgentId,
        reason: &str,
    ) -> Result<Applied, SyncError> {
        if task == &self.base_task {
            return Err(SyncError::BaseTask);
        }
        let state = self
            .tasks
            .get(task)
            .ok_or_else(|| SyncError::UnknownTask(task.clone()))?
            .execution_state;
        if state.is_over() {
            return Err(SyncError::TaskOver(task.clone(), state));
        }
        let reason = reason.trim();
        let summary = if reason.is_empty() {
            format!("Cancelled by `{by}`.")
        } else {
            format!("Cancelled by `{by}`: {reason}")
        };
        let mut applied = Applied::default();
        self.close_task(task, ExecutionState::Cancelled, summary, &mut applied);
        Ok(applied)
    }
}

impl SyncCore {
    /// `by` retries the running stage `stage` of `task` with its agents and goals.
    pub fn operator_retry_stage(
        &mut self,
        task: &TaskId,
        stage: &StageId,
        by: &AgentId,
    ) -> Result<Applied, SyncError> {
        let manager = self
            .tasks
            .get(task)
            .ok_or_else(|| SyncError::UnknownTask(task.clone()))?
            .task_manager
            .clone();
        let old = self.stage_of(task, stage)?;
        let retry = TaskInstruction::RetryStage {
            task_id: task.clone(),
            stage_id: stage.clone(),
            stage_intention: None,
            agent_allocation: old.agent_allocation.clone(),
        };
        // The same checks as the manager's own retry: an open task, the running stage.
        self.check_instruction(&manager, &retry)?;
        tracing::info!(task = %task, stage = %stage, by = %by, "an operator retries a stage");
        let mut applied = Applied::default();
        self.run_instruction(&manager, &retry, &mut applied);
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Instruction;
    use crate::sync::tests::two_stage_task;

    #[test]
    fn a_cancelled_task_and_its_open_stages_are_cancelled_and_its_group_told() {
        let (mut c, t, stages) = two_stage_task();
        let a = c.cancel_task(&t, &"op".into(), "wrong goal").unwrap();
        let task = c.task(&t).unwrap();
        assert_eq!(task.execution_state, ExecutionState::Cancelled);
        assert_eq!(
            task.task_summary.as_deref(),
            Some("Cancelled by `op`: wrong goal")
        );
        for s in &stages {
            assert_eq!(
                c.stage(s).unwrap().execution_state,
                ExecutionState::Cancelled
            );
        }
        let told = a
            .messages
            .iter()
            .find(|m| m.message.contains("finish_task"))
            .expect("the group is told");
        assert_eq!(told.receiver.len(), 3);
        assert!(matches!(
            crate::parse::instruction(&told.message),
            Some(Ok(Instruction::FinishTask { .. }))
        ));
        // Once over, or the base task: refused.
        assert!(matches!(
            c.cancel_task(&t, &"op".into(), ""),
            Err(SyncError::TaskOver(..))
        ));
        let base = c.base_task().clone();
        assert!(matches!(
            c.cancel_task(&base, &"op".into(), ""),
            Err(SyncError::BaseTask)
        ));
        assert!(matches!(
            c.cancel_task(&"nope".into(), &"op".into(), ""),
            Err(SyncError::UnknownTask(_))
        ));
    }

    #[test]
    fn an_operator_retries_the_running_stage_with_the_same_agents() {
        let (mut c, t, stages) = two_stage_task();
        let before = c.task(&t).unwrap().stage_list.len();
        c.operator_retry_stage(&t, &stages[0], &"op".into())
            .unwrap();
        assert_eq!(
            c.stage(&stages[0]).unwrap().execution_state,
            ExecutionState::Failed
        );
        let list = c.task(&t).unwrap().stage_list.clone();
        assert_eq!(list.len(), before + 1);
        let fresh = c.stage(&list[1]).unwrap();
        assert_eq!(fresh.execution_state, ExecutionState::Running);
        assert_eq!(
            fresh.agent_allocation,
            c.stage(&stages[0]).unwrap().agent_allocation
        );
        // Only the running stage: the one not yet started (and the old one) are refused.
        assert!(matches!(
            c.operator_retry_stage(&t, &stages[1], &"op".into()),
            Err(SyncError::StageNotRunning { .. })
        ));
        assert!(matches!(
            c.operator_retry_stage(&t, &stages[0], &"op".into()),
            Err(SyncError::StageNotRunning { .. })
        ));
    }
}
