//! What a person does to a task directly, outside any agent's step: cancel it. Its open
//! stages and the task become `cancelled`, and its group drops the task's work (an agent's
//! LLM or tool call in flight for it is abandoned).

use super::{Applied, SyncCore, SyncError};
use crate::ids::{AgentId, TaskId};
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
}
