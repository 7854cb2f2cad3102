//! How much work the team's models may open (`task_limits:`), counted and enforced by SyncState
//! whatever a model answers: `add_task` only from the base task, a cap on open tasks, on tasks
//! a manager opens per message of a person, on a task's stages, and on the messages agents
//! send in the base task per message of a person. Each person's message in the base task gives
//! the team's managers (whichever of them opens the work: one may hand a goal to another) and
//! the base task's chatter that many more: goals given in a row may each be worked on, but
//! nothing a model does alone adds to what it may do. A prompt or a JSON schema
//! only asks; a model that ignores them (tag answers, an endpoint without structured output)
//! once opened six thousand tasks in fifteen seconds from one goal.
//!
//! Each refusal fails the step that asked (its reason recorded and streamed, the manager's
//! second try told), and the team's operators get one notice per limit until a person writes
//! in the base task again.

use super::{Applied, SyncCore, SyncError};
use crate::config::TaskLimits;
use crate::ids::{AgentId, StageRef, TaskId};
use crate::message::{Message, OPERATOR, SYNC_STATE_SENDER, TASK_STATE_SENDER, TaskInstruction};
use std::collections::BTreeSet;

/// Which limit a refusal hit (operators are told once per kind and goal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LimitKind {
    /// `add_task` outside the base task ([`SyncError::AddTaskOutsideBase`]).
    AddTaskOutsideBase,
    /// `task_limits.open_tasks` ([`SyncError::OpenTasks`]).
    OpenTasks,
    /// `task_limits.tasks_per_goal` ([`SyncError::TasksPerGoal`]).
    TasksPerGoal,
    /// `task_limits.stages_per_task` ([`SyncError::StagesPerTask`]).
    StagesPerTask,
    /// `task_limits.base_messages_per_goal` ([`SyncError::BaseMessages`]).
    BaseMessages,
}

/// What the people's messages allow the team to open yet (see [`TaskLimits`]).
#[derive(Debug, Default)]
pub(super) struct WorkCount {
    /// Tasks the team's managers may still open.
    tasks: usize,
    /// Messages agents may still send in the base task.
    base_messages: usize,
    /// Limits the operators were told of since a person last wrote in the base task.
    told: BTreeSet<LimitKind>,
}

impl SyncError {
    /// The limit this refusal is, if it is one of [`TaskLimits`].
    pub fn limit(&self) -> Option<LimitKind> {
        Some(match self {
            SyncError::AddTaskOutsideBase(_) => LimitKind::AddTaskOutsideBase,
            SyncError::OpenTasks { .. } => LimitKind::OpenTasks,
            SyncError::TasksPerGoal { .. } => LimitKind::TasksPerGoal,
            SyncError::StagesPerTask { .. } => LimitKind::StagesPerTask,
            SyncError::BaseMessages { .. } => LimitKind::BaseMessages,
            _ => return None,
        })
    }
}

impl SyncCore {
    /// Mends the models' slips as `repairs` says (SyncState applies the stage run limit).
    pub fn with_repairs(mut self, repairs: crate::policy::Repairs) -> Self {
        self.repairs = repairs;
        self
    }

    /// Holds the models' work to `limits`. The team starts with one goal's allowance: a team
    /// carried over from a store may be in the middle of a goal its people gave before.
    pub fn with_task_limits(mut self, limits: TaskLimits) -> Self {
        self.task_limits = limits;
        self.work.tasks = limits.tasks_per_goal;
        self.work.base_messages = limits.base_messages_per_goal;
        self
    }

    /// Whether a step in task `from` may give `i` within the limits (checked before the
    /// instruction's own rules).
    pub(super) fn within_limits(
        &self,
        from: Option<&TaskId>,
        i: &TaskInstruction,
    ) -> Result<(), SyncError> {
        let limits = &self.task_limits;
        match i {
            TaskInstruction::AddTask { .. } => {
                if from != Some(&self.base_task) {
                    let from = from.cloned().unwrap_or_else(|| TaskId::from("(none)"));
                    return Err(SyncError::AddTaskOutsideBase(from));
                }
                let open = self
                    .tasks
                    .values()
                    .filter(|t| t.task_id != self.base_task && !t.execution_state.is_over())
                    .count();
                if open >= limits.open_tasks {
                    return Err(SyncError::OpenTasks {
                        open,
                        max: limits.open_tasks,
                    });
                }
                if self.work.tasks == 0 {
                    return Err(SyncError::TasksPerGoal {
                        max: limits.tasks_per_goal,
                    });
                }
                Ok(())
            }
            TaskInstruction::AddStage { task_id, stages } => {
                self.room_for_stages(task_id, stages.len())
            }
            TaskInstruction::RetryStage { task_id, .. } => self.room_for_stages(task_id, 1),
            _ => Ok(()),
        }
    }

    fn room_for_stages(&self, task: &TaskId, more: usize) -> Result<(), SyncError> {
        let Some(t) = self.tasks.get(task) else {
            return Ok(());
        };
        let stages = t.stage_list.len();
        let max = self.task_limits.stages_per_task;
        if stages + more > max {
            return Err(SyncError::StagesPerTask {
                task: task.clone(),
                stages,
                max,
            });
        }
        Ok(())
    }

    /// Whether an agent may send `m` now: in the base task, agents' messages between two of a
    /// person's are capped (the runtime's own notices are not counted).
    pub(super) fn message_within_limits(&self, m: &Message) -> Result<(), SyncError> {
        if m.task_id != self.base_task || self.spoken_by_runtime_or_person(&m.sender_id) {
            return Ok(());
        }
        if self.work.base_messages == 0 {
            return Err(SyncError::BaseMessages {
                max: self.task_limits.base_messages_per_goal,
            });
        }
        Ok(())
    }

    fn spoken_by_runtime_or_person(&self, sender: &AgentId) -> bool {
        [TASK_STATE_SENDER, SYNC_STATE_SENDER].contains(&sender.as_str()) || self.is_person(sender)
    }

    /// A person of the team, or the operator `cohort run` gives a goal for (not on the
    /// roster when the team has no people).
    pub(super) fn is_person(&self, sender: &AgentId) -> bool {
        match self.member(sender) {
            Some(m) => m.human,
            None => sender.as_str() == OPERATOR,
        }
    }

    /// Counts a routed message against the limits: a person's message in the base task gives
    /// the managers more tasks to open and the base task more messages; an agent's message
    /// there uses one.
    pub(super) fn count_routed(&mut self, m: &Message) {
        if m.task_id != self.base_task {
            return;
        }
        let limits = self.task_limits;
        if self.is_person(&m.sender_id) {
            self.work.tasks += limits.tasks_per_goal;
            self.work.base_messages += limits.base_messages_per_goal;
            self.work.told.clear();
        } else if !self.spoken_by_runtime_or_person(&m.sender_id) {
            self.work.base_messages = self.work.base_messages.saturating_sub(1);
        }
    }

    /// Counts a task a manager opened.
    pub(super) fn count_opened(&mut self) {
        self.work.tasks = self.work.tasks.saturating_sub(1);
    }

    /// A refusal for a limit: the team's operators are told, once per limit until a person
    /// writes in the base task again.
    pub(super) fn tell_operators(&mut self, agent: &AgentId, why: &SyncError, out: &mut Applied) {
        let Some(kind) = why.limit() else {
            return;
        };
        if !self.work.told.insert(kind) {
            return;
        }
        self.tell_operators_that(format!("Refused a step of `{agent}`: {why}"), out);
    }

    /// A notice from SyncState to the team's operators in the base task (none without one).
    pub(super) fn tell_operators_that(&self, what: String, out: &mut Applied) {
        let operators: Vec<AgentId> = self
            .roster
            .iter()
            .filter(|m| m.operator)
            .map(|m| m.id.clone())
            .collect();
        if operators.is_empty() {
            return;
        }
        out.messages.push(Message::notice(
            self.base_task.clone(),
            AgentId::from(SYNC_STATE_SENDER),
            operators,
            StageRef::NoRelative,
            format!("[SyncState] {what}"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{TryApply, by_in, core};
    use super::*;
    use crate::message::{ExecuteOutput, StagePlan};

    fn add_task() -> TaskInstruction {
        TaskInstruction::AddTask {
            attachments: Vec::new(),
            task_id: TaskId::random(),
            task_name: "n".into(),
            task_intention: "i".into(),
            requested_by: None,
            goal_step: None,
            trace_id: None,
        }
    }

    fn limited(limits: TaskLimits) -> SyncCore {
        let mut roster: Vec<_> = ["m", "a"]
            .iter()
            .map(|id| super::super::Member::new(*id, "r"))
            .collect();
        roster.push(super::super::Member {
            human: true,
            operator: true,
            ..super::super::Member::new("op", "operator")
        });
        SyncCore::new(roster, &["m".into()], &["op".into()]).with_task_limits(limits)
    }

    fn goal(c: &mut SyncCore) {
        let m = Message::notice(
            c.base_task().clone(),
            "op".into(),
            vec!["m".into()],
            StageRef::NoRelative,
            "a goal".into(),
        );
        let a = c.submit(m).unwrap();
        for m in a.messages {
            c.record_sent(m, "now");
        }
    }

    #[test]
    fn add_task_is_refused_outside_the_base_task_whatever_the_answer() {
        let mut c = core();
        let base = c.base_task().clone();
        let a = c.try_apply(&by_in(&base, "m", add_task()), "now").unwrap();
        let task = a.changes.iter().find_map(|ch| match ch {
            crate::event::Change::Task(crate::event::TaskChange::Created { task }) => {
                Some(task.task_id.clone())
            }
            _ => None,
        });
        let task = task.unwrap();
        // The manager answers the "task created" notice (a step in the new task) with another
        // add_task: refused, and it bars the action from a second try.
        let e = c
            .try_apply(&by_in(&task, "m", add_task()), "now")
            .unwrap_err();
        assert!(
            matches!(e, SyncError::AddTaskOutsideBase(ref t) if *t == task),
            "{e}"
        );
        assert!(e.bars_the_action());
        let no_task = ExecuteOutput {
            task_id: None,
            ..by_in(&base, "m", add_task())
        };
        assert!(
            c.apply(&no_task, "now").refused.is_some(),
            "a step must say its task"
        );
    }

    #[test]
    fn tasks_per_goal_and_open_tasks_are_capped_and_a_persons_message_opens_a_new_allowance() {
        let mut c = limited(TaskLimits {
            tasks_per_goal: 2,
            open_tasks: 3,
            ..TaskLimits::default()
        });
        let base = c.base_task().clone();
        // The team starts with one goal's allowance.
        for _ in 0..2 {
            c.try_apply(&by_in(&base, "m", add_task()), "now").unwrap();
        }
        let mut a = c.apply(&by_in(&base, "m", add_task()), "now");
        let e = a.refused.take().unwrap();
        assert!(matches!(e, SyncError::TasksPerGoal { max: 2 }), "{e}");
        // The operator is told once.
        assert_eq!(a.messages.len(), 1);
        assert_eq!(a.messages[0].receiver, vec![AgentId::from("op")]);
        assert!(a.messages[0].message.contains("tasks_per_goal"));
        let again = c.apply(&by_in(&base, "m", add_task()), "now");
        assert!(again.refused.is_some() && again.messages.is_empty());
        goal(&mut c);
        c.try_apply(&by_in(&base, "m", add_task()), "now").unwrap();
        let e = c
            .try_apply(&by_in(&base, "m", add_task()), "now")
            .unwrap_err();
        assert!(matches!(e, SyncError::OpenTasks { open: 3, max: 3 }), "{e}");
    }

    #[test]
    fn a_task_has_at_most_its_stages() {
        let mut c = limited(TaskLimits {
            stages_per_task: 2,
            ..TaskLimits::default()
        });
        let base = c.base_task().clone();
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
        c.try_apply(&by_in(&base, "m", add), "now").unwrap();
        let stage = |goal: &str| StagePlan {
            stage_intention: goal.into(),
            agent_allocation: [(AgentId::from("a"), "do it".into())].into(),
        };
        let stages = |goals: &[&str]| TaskInstruction::AddStage {
            task_id: t.clone(),
            stages: goals.iter().map(|g| stage(g)).collect(),
        };
        let e = c
            .try_apply(&by_in(&t, "m", stages(&["a", "b", "c"])), "now")
            .unwrap_err();
        assert!(
            matches!(
                e,
                SyncError::StagesPerTask {
                    stages: 0,
                    max: 2,
                    ..
                }
            ),
            "{e}"
        );
        c.try_apply(&by_in(&t, "m", stages(&["a", "b"])), "now")
            .unwrap();
        assert!(c.try_apply(&by_in(&t, "m", stages(&["c"])), "now").is_err());
    }

    #[test]
    fn agents_chatter_in_the_base_task_is_capped_until_a_person_writes() {
        let mut c = limited(TaskLimits {
            base_messages_per_goal: 2,
            ..TaskLimits::default()
        });
        let base = c.base_task().clone();
        let chat = |c: &SyncCore| ExecuteOutput {
            send_message: Some(Message::notice(
                c.base_task().clone(),
                "m".into(),
                vec!["op".into()],
                StageRef::NoRelative,
                "hello".into(),
            )),
            ..by_in(&base, "m", add_task())
        };
        let send = |c: &mut SyncCore| {
            let out = ExecuteOutput {
                task_instruction: None,
                ..chat(c)
            };
            let mut a = c.apply(&out, "now");
            let refused = a.refused.take();
            for m in a.messages {
                c.record_sent(m, "now");
            }
            refused
        };
        assert!(send(&mut c).is_none() && send(&mut c).is_none());
        let e = send(&mut c).unwrap();
        assert!(matches!(e, SyncError::BaseMessages { max: 2 }), "{e}");
        goal(&mut c);
        assert!(send(&mut c).is_none());
    }
}
