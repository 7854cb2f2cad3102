//! What a person does to a task directly, outside any agent's step. Cancel it: its open
//! stages and the task become `cancelled`, and its group drops the task's work (an agent's
//! LLM or tool call in flight for it is abandoned). Pause it: its group starts none of its
//! steps until it is resumed. Retry its running stage (stuck, or its
//! agents failed): the stage fails and a fresh copy with the same agents and goals starts, as
//! the manager's `retry_stage` would.

use super::{Applied, SyncCore, SyncError};
use crate::event::{Change, StageChange, TaskChange};
use crate::ids::{AgentId, StageId, StageRef, TaskId};
use crate::message::{Instruction, Message, TASK_STATE_SENDER, TaskInstruction};
use crate::report::TaskWritten;
use crate::state::{ExecutionState, TaskState};

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
        self.open_task(task)?;
        let mut applied = Applied::default();
        let cancelled = TaskWritten::Cancelled {
            by: by.clone(),
            reason: reason.to_owned(),
        };
        let summary = (String::new(), Some(Box::new(cancelled)));
        self.close_task(task, ExecutionState::Cancelled, summary, None, &mut applied);
        Ok(applied)
    }

    /// `task`, when it exists and is not over.
    fn open_task(&self, task: &TaskId) -> Result<&TaskState, SyncError> {
        let t = self
            .tasks
            .get(task)
            .ok_or_else(|| SyncError::UnknownTask(task.clone()))?;
        if t.execution_state.is_over() {
            return Err(SyncError::TaskOver(task.clone(), t.execution_state));
        }
        Ok(t)
    }
}

impl SyncCore {
    /// `by` pauses (or resumes) `task`: its group is told, and its agents start none of its
    /// steps until it is resumed (a step running goes on to its end).
    pub fn pause_task(
        &mut self,
        task: &TaskId,
        by: &AgentId,
        paused: bool,
    ) -> Result<Applied, SyncError> {
        if task == &self.base_task {
            return Err(SyncError::BaseTask);
        }
        let t = self.open_task(task)?;
        let mut applied = Applied::default();
        if t.paused == paused {
            return Ok(applied);
        }
        let group = t.task_group.clone();
        tracing::info!(task = %task, by = %by, paused, "an operator pauses or resumes a task");
        self.emit(
            &mut applied,
            Change::Task(TaskChange::Paused {
                task_id: task.clone(),
                paused,
            }),
        );
        applied.messages.push(Message::instruction(
            task.clone(),
            AgentId::from(TASK_STATE_SENDER),
            group,
            StageRef::NoRelative,
            &Instruction::PauseTask {
                task_id: task.clone(),
                paused,
            },
            &self.texts,
        ));
        Ok(applied)
    }

    /// Marks `task` as forked `from` a recorded task's step (`cohort replay --fork-at`), over
    /// or not: what the console shows beside it.
    pub fn mark_forked(
        &mut self,
        task: &TaskId,
        from: crate::state::ForkedFrom,
    ) -> Result<Applied, SyncError> {
        if task == &self.base_task {
            return Err(SyncError::BaseTask);
        }
        if !self.tasks.contains_key(task) {
            return Err(SyncError::UnknownTask(task.clone()));
        }
        let mut applied = Applied::default();
        self.emit(
            &mut applied,
            Change::Task(TaskChange::Forked {
                task_id: task.clone(),
                from,
            }),
        );
        Ok(applied)
    }

    /// `by` cancels `stage` of `task` with `reason`: it becomes `cancelled` (the reason in its
    /// summaries, under `by`); a running stage's agents drop its work (calls in flight for it
    /// are abandoned) and the next stage starts, or the manager is asked to judge the task.
    pub fn cancel_stage(
        &mut self,
        task: &TaskId,
        stage: &StageId,
        by: &AgentId,
        reason: &str,
    ) -> Result<Applied, SyncError> {
        self.open_task(task)?;
        let s = self.stage_of(task, stage)?;
        if s.execution_state.is_over() {
            return Err(SyncError::StageNotRunning {
                stage: stage.clone(),
                state: s.execution_state,
            });
        }
        let running = s.execution_state == ExecutionState::Running;
        let agents: Vec<AgentId> = s.agent_allocation.keys().cloned().collect();
        tracing::info!(task = %task, stage = %stage, by = %by, "an operator cancels a stage");
        let mut applied = Applied::default();
        let why = self.texts.cancelled(by, reason);
        self.emit(
            &mut applied,
            Change::Stage(StageChange::Completion {
                stage_id: stage.clone(),
                agent_id: by.clone(),
                summary: why,
                results: Vec::new(),
                written: crate::report::Written::Own,
            }),
        );
        self.set_stage_state(stage, ExecutionState::Cancelled, &mut applied);
        if running {
            applied
                .messages
                .push(super::instructions::finish_stage_message(
                    task,
                    stage,
                    agents,
                    &self.texts,
                ));
            self.start_next_stage(task, &mut applied);
        }
        Ok(applied)
    }

    /// Agents joining a paused task are told it is paused (the group was told when it was).
    pub(super) fn tell_if_paused(&self, task: &TaskId, joined: &[AgentId], applied: &mut Applied) {
        if !self.tasks.get(task).is_some_and(|t| t.paused) || joined.is_empty() {
            return;
        }
        applied.messages.push(Message::instruction(
            task.clone(),
            AgentId::from(TASK_STATE_SENDER),
            joined.to_vec(),
            StageRef::NoRelative,
            &Instruction::PauseTask {
                task_id: task.clone(),
                paused: true,
            },
            &self.texts,
        ));
    }

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
    use crate::team::tests::two_stage_task;

    #[test]
    fn a_cancelled_stage_stops_its_agents_and_the_next_one_starts() {
        // A stage not started yet is cancelled without telling or starting anything.
        let (mut c, t, stages) = two_stage_task();
        let quiet = c.cancel_stage(&t, &stages[1], &"op".into(), "").unwrap();
        assert!(quiet.messages.is_empty(), "{:?}", quiet.messages);
        assert_eq!(
            c.stages[&stages[1]].execution_state,
            ExecutionState::Cancelled
        );
        assert_eq!(
            c.stages[&stages[0]].execution_state,
            ExecutionState::Running
        );

        let (mut c, t, stages) = two_stage_task();
        let a = c
            .cancel_stage(&t, &stages[0], &"op".into(), "wrong approach")
            .unwrap();
        let first = &c.stages[&stages[0]];
        assert_eq!(first.execution_state, ExecutionState::Cancelled);
        assert_eq!(
            first.completion_summary[&AgentId::from("op")],
            "Cancelled by `op`: wrong approach"
        );
        assert_eq!(
            c.stages[&stages[1]].execution_state,
            ExecutionState::Running
        );
        let told: Vec<_> = a
            .messages
            .iter()
            .filter_map(|m| m.instruction_body().cloned())
            .collect();
        assert!(
            told.contains(&Instruction::FinishStage {
                stage_id: stages[0].clone()
            }),
            "{told:?}"
        );
        // Over already: refused.
        assert!(matches!(
            c.cancel_stage(&t, &stages[0], &"op".into(), ""),
            Err(SyncError::StageNotRunning { .. })
        ));
    }

    #[test]
    fn a_paused_task_tells_its_group_and_agents_that_join_it_later() {
        let (mut c, t, _) = two_stage_task();
        let a = c.pause_task(&t, &"op".into(), true).unwrap();
        assert!(c.task(&t).unwrap().paused);
        let told = &a.messages[0];
        assert_eq!(told.receiver, c.task(&t).unwrap().task_group);
        assert_eq!(
            told.instruction_body().cloned().unwrap(),
            Instruction::PauseTask {
                task_id: t.clone(),
                paused: true
            }
        );
        // Pausing it again changes nothing.
        assert!(
            c.pause_task(&t, &"op".into(), true)
                .unwrap()
                .messages
                .is_empty()
        );
        let mut later = Applied::default();
        c.tell_if_paused(&t, &["newcomer".into()], &mut later);
        assert_eq!(later.messages[0].receiver, vec![AgentId::from("newcomer")]);
        c.pause_task(&t, &"op".into(), false).unwrap();
        let mut later = Applied::default();
        c.tell_if_paused(&t, &["newcomer".into()], &mut later);
        assert!(later.messages.is_empty(), "a resumed task tells no one");
        let base = c.base_task.clone();
        assert!(matches!(
            c.pause_task(&base, &"op".into(), true),
            Err(SyncError::BaseTask)
        ));
    }

    #[test]
    fn a_forked_task_names_its_origin_even_once_over_and_tells_no_one() {
        let (mut c, t, _) = two_stage_task();
        c.cancel_task(&t, &"op".into(), "").unwrap();
        let from = crate::state::ForkedFrom {
            task_id: "recorded".into(),
            step_id: "failed-step".into(),
        };
        let a = c.mark_forked(&t, from.clone()).unwrap();
        assert!(a.messages.is_empty());
        assert_eq!(c.task(&t).unwrap().forked_from, Some(from.clone()));
        assert!(matches!(
            c.mark_forked(&"nowhere".into(), from.clone()),
            Err(SyncError::UnknownTask(_))
        ));
        let base = c.base_task.clone();
        assert!(matches!(
            c.mark_forked(&base, from),
            Err(SyncError::BaseTask)
        ));
    }

    #[test]
    fn a_cancelled_task_and_its_open_stages_are_cancelled_and_its_group_told() {
        let (mut c, t, stages) = two_stage_task();
        let a = c.cancel_task(&t, &"op".into(), "wrong goal").unwrap();
        let task = c.task(&t).unwrap();
        assert_eq!(task.execution_state, ExecutionState::Cancelled);
        // Who and why are the runtime's record, not a manager's words.
        assert_eq!(task.task_summary.as_deref(), Some(""));
        let said = task.summary_text(&crate::texts::Texts::english());
        assert_eq!(said.as_deref(), Some("Cancelled by `op`: wrong goal"));
        assert_eq!(task.outcome.as_ref().unwrap().why, said);
        for s in &stages {
            assert_eq!(
                c.stage(s).unwrap().execution_state,
                ExecutionState::Cancelled
            );
        }
        let told = a
            .messages
            .iter()
            .find(|m| {
                matches!(
                    m.instruction_body(),
                    Some(crate::message::Instruction::FinishTask { .. })
                )
            })
            .expect("the group is told");
        assert_eq!(told.receiver.len(), 3);
        assert!(matches!(
            told.instruction_body(),
            Some(Instruction::FinishTask { .. })
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
