//! Per-task budgets (`step_limits.task_tokens`, `step_limits.task_steps`): a task that has spent
//! more tokens or run more steps than its budget is stopped, failed with the reason as its
//! summary, and its agents drop its work; the base task is never stopped.

use super::{Applied, SyncCore};
use crate::ids::{AgentId, TaskId};
use crate::message::{TaskInstruction, TaskOutcome};

/// What one task may spend; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskBudget {
    /// The most tokens a task may spend (`step_limits.task_tokens`).
    pub tokens: Option<u64>,
    /// The most steps a task may run in this process (`step_limits.task_steps`).
    pub steps: Option<u64>,
}

/// Why a task that spent `tokens` and ran `steps` is over `budget`, or `None`.
pub fn over_budget(budget: &TaskBudget, tokens: u64, steps: u64) -> Option<String> {
    if let Some(max) = budget.tokens.filter(|max| tokens > *max) {
        return Some(format!(
            "stopped: the task spent {tokens} tokens, over its budget of {max} \
             (step_limits.task_tokens)"
        ));
    }
    budget.steps.filter(|max| steps > *max).map(|max| {
        format!(
            "stopped: the task ran {steps} steps, over its budget of {max} (step_limits.task_steps)"
        )
    })
}

impl SyncCore {
    /// Stops every task but the base task once it spends more than `budget`.
    pub fn with_budget(mut self, budget: TaskBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Counts a step of `task` and stops the task when it is over its budget.
    pub(super) fn hold_to_budget(&mut self, task: &TaskId, applied: &mut Applied) {
        if *task == self.base_task {
            return;
        }
        let Some(state) = self
            .tasks
            .get(task)
            .filter(|t| !t.execution_state.is_over())
        else {
            self.steps_run.remove(task);
            return;
        };
        let steps = self.steps_run.entry(task.clone()).or_default();
        *steps += 1;
        let Some(why) = over_budget(&self.budget, state.token_usage.total(), *steps) else {
            return;
        };
        tracing::warn!(task = %task, "{why}");
        self.steps_run.remove(task);
        let manager: AgentId = state.task_manager.clone();
        let stop = TaskInstruction::FinishTask {
            task_id: task.clone(),
            task_summary: why,
            outcome: TaskOutcome::Failed,
            summary_written: None,
        };
        self.run_instruction(&manager, &stop, applied);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageRef;
    use crate::message::{ExecuteOutput, SharedInfoUpdate};
    use crate::state::{ExecutionState, TokenUsage};

    fn step_of(task: &TaskId, tokens: u64) -> ExecuteOutput {
        ExecuteOutput {
            agent_id: Some("a".into()),
            token_usage: Some((task.clone(), TokenUsage::new(tokens, 0))),
            send_shared_info: Some(SharedInfoUpdate {
                task_id: task.clone(),
                stage_id: StageRef::NoRelative,
                agent_id: "a".into(),
                role: "r".into(),
                content: "did a step".into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_step_that_finishes_its_task_over_budget_finishes_it_once() {
        let mut c = crate::team::tests::core().with_budget(TaskBudget {
            tokens: Some(100),
            steps: None,
        });
        let t = TaskId::random();
        let add = TaskInstruction::AddTask {
            attachments: Vec::new(),
            task_id: t.clone(),
            task_name: "n".into(),
            task_intention: "i".into(),
            requested_by: None,
            goal_step: None,
            trace_id: None,
        };
        crate::team::tests::TryApply::try_apply(&mut c, &crate::team::tests::by("m", add), "now")
            .unwrap();
        crate::team::tests::stage_done(&mut c, &t);
        let mut out = step_of(&t, 500);
        out.agent_id = Some("m".into());
        out.task_instruction = Some(TaskInstruction::FinishTask {
            task_id: t.clone(),
            task_summary: "done well".into(),
            outcome: TaskOutcome::Finished,
            summary_written: None,
        });
        let applied = c.apply(&out, "now");
        let task = c.task(&t).unwrap();
        assert_eq!(task.execution_state, ExecutionState::Finished);
        assert_eq!(task.task_summary.as_deref(), Some("done well"));
        let finishes = applied
            .messages
            .iter()
            .filter(|m| {
                matches!(
                    m.instruction_body(),
                    Some(crate::message::Instruction::FinishTask { .. })
                )
            })
            .count();
        assert_eq!(finishes, 1);
    }

    #[test]
    fn a_task_past_its_token_budget_is_stopped_and_its_agents_told() {
        let mut c = crate::team::tests::core().with_budget(TaskBudget {
            tokens: Some(250),
            steps: None,
        });
        let t = TaskId::random();
        crate::team::tests::TryApply::try_apply(
            &mut c,
            &crate::team::tests::by(
                "m",
                TaskInstruction::AddTask {
                    attachments: Vec::new(),
                    task_id: t.clone(),
                    task_name: "n".into(),
                    task_intention: "i".into(),
                    requested_by: None,
                    goal_step: None,
                    trace_id: None,
                },
            ),
            "now",
        )
        .unwrap();
        c.apply(&step_of(&t, 200), "now");
        assert_eq!(c.task(&t).unwrap().execution_state, ExecutionState::Init);
        let applied = c.apply(&step_of(&t, 100), "now");
        let task = c.task(&t).unwrap();
        assert_eq!(task.execution_state, ExecutionState::Failed);
        assert!(task.task_summary.as_deref().unwrap().contains("300 tokens"));
        assert!(
            applied.messages.iter().any(|m| matches!(
                m.instruction_body(),
                Some(crate::message::Instruction::FinishTask { .. })
            )),
            "the task group is told to drop the task's work"
        );
        // The base task is never stopped.
        let base = c.base_task().clone();
        c.apply(&step_of(&base, 10_000), "now");
        assert!(!c.task(&base).unwrap().execution_state.is_over());
    }

    #[test]
    fn a_task_is_over_budget_only_past_a_limit_it_has() {
        let none = TaskBudget::default();
        assert_eq!(over_budget(&none, u64::MAX, u64::MAX), None);
        let b = TaskBudget {
            tokens: Some(1000),
            steps: Some(10),
        };
        assert_eq!(over_budget(&b, 1000, 10), None);
        assert!(over_budget(&b, 1001, 1).unwrap().contains("1001 tokens"));
        assert!(over_budget(&b, 5, 11).unwrap().contains("11 steps"));
    }
}
