//! Per-task budgets (`step_limits.task_tokens`, `step_limits.task_steps`): a task that has spent
//! more tokens or run more steps than its budget is stopped, failed with the reason (the
//! runtime's part of its summary, `TaskWritten::OverBudget`), and its agents drop its work; the
//! base task is never stopped.

use super::{Applied, SyncCore};
use crate::ids::TaskId;
use crate::report::{Budgeted, TaskWritten};
use crate::state::ExecutionState;

/// What one task may spend; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskBudget {
    /// The most tokens a task may spend (`step_limits.task_tokens`).
    pub tokens: Option<u64>,
    /// The most steps a task may run in this process (`step_limits.task_steps`).
    pub steps: Option<u64>,
}

/// Why a task that spent `tokens` and ran `steps` is over `budget`, or `None`.
pub fn over_budget(budget: &TaskBudget, tokens: u64, steps: u64) -> Option<TaskWritten> {
    let over = |of, spent, max: Option<u64>| {
        let max = max.filter(|max| spent > *max)?;
        Some(TaskWritten::OverBudget { of, spent, max })
    };
    over(Budgeted::Tokens, tokens, budget.tokens)
        .or_else(|| over(Budgeted::Steps, steps, budget.steps))
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
        let Some(over) = over_budget(&self.budget, state.token_usage.total(), *steps) else {
            return;
        };
        tracing::warn!(task = %task, "{}", over.render("", &self.texts));
        self.steps_run.remove(task);
        let summary = (String::new(), Some(Box::new(over)));
        self.close_task(task, ExecutionState::Failed, summary, None, applied);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageRef;
    use crate::message::{ExecuteOutput, SharedInfoUpdate};
    use crate::message::{TaskInstruction, TaskOutcome};
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
        // No words of the manager's: the runtime's reason, in the task's record too.
        assert_eq!(task.task_summary.as_deref(), Some(""));
        let t_en = crate::texts::Texts::english();
        let said = task.summary_text(&t_en).unwrap();
        assert!(said.contains("300 tokens"), "{said}");
        assert_eq!(task.outcome.as_ref().unwrap().why.as_deref(), Some(&*said));
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
        let over = |of, spent, max| Some(TaskWritten::OverBudget { of, spent, max });
        assert_eq!(over_budget(&b, 1001, 1), over(Budgeted::Tokens, 1001, 1000));
        assert_eq!(over_budget(&b, 5, 11), over(Budgeted::Steps, 11, 10));
        let t = crate::texts::Texts::english();
        let said = over_budget(&b, 5, 11).unwrap().render("", &t);
        assert!(said.contains("11 steps, over its budget of 10"), "{said}");
    }
}
