//! Which open tasks nobody works on any more: no agent has a step of the task left to run, runs
//! one, or waits for a reply in it, though the task is not over. A served team's watchdog
//! (`cohort_runtime::watchdog`) tells such a task's goal-giver once it has stayed so a while.

use super::States;
use crate::ids::TaskId;
use crate::state::ExecutionState;
use std::collections::BTreeSet;

/// The open tasks (not paused, with someone to tell) that no agent has any work left in now.
pub fn idle_tasks(states: &States) -> Vec<TaskId> {
    let mut busy: BTreeSet<&TaskId> = BTreeSet::new();
    for agent in states.agents.values() {
        for s in agent.agent_step.steps() {
            if !s.execution_state.is_over() {
                busy.insert(&s.task_id);
            }
        }
        for w in agent.step_lock.waits() {
            busy.insert(&w.task);
        }
    }
    states
        .tasks
        .values()
        .filter(|t| {
            matches!(
                t.execution_state,
                ExecutionState::Init | ExecutionState::Running
            )
        })
        .filter(|t| !t.paused && t.requested_by.is_some() && !busy.contains(&t.task_id))
        .map(|t| t.task_id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentChange, Change, TaskChange};
    use crate::ids::StageRef;
    use crate::state::{Agent, AgentState, Executor, Skill, StepState, TaskState};

    fn task(id: &str, requested_by: Option<&str>) -> Change {
        let mut t = TaskState::new(id.into(), "n".into(), "i".into(), "m".into());
        t.requested_by = requested_by.map(Into::into);
        Change::Task(TaskChange::Created { task: Box::new(t) })
    }

    #[test]
    fn a_task_is_idle_when_no_agent_has_work_or_a_wait_in_it() {
        let mut s = States::default();
        let mut m = Agent::from(AgentState::new(
            "m".into(),
            "M".into(),
            "manager".into(),
            "p".into(),
        ));
        m.add_steps(vec![StepState::new(
            "busy".into(),
            StageRef::NoRelative,
            "m".into(),
            Executor::Skill(Skill::Think),
            "x",
            "",
        )]);
        m.hold_waits(
            vec![("w".into(), "op".into())],
            &"waits".into(),
            &StageRef::NoRelative,
            0,
            None,
        );
        s.apply(&Change::Agent(AgentChange::Added {
            agent: Box::new(m.into_state()),
        }));
        for (id, by) in [
            ("busy", Some("op")),
            ("waits", Some("op")),
            ("idle", Some("op")),
            ("own", None),
        ] {
            s.apply(&task(id, by));
        }
        assert_eq!(idle_tasks(&s), [TaskId::from("idle")]);
        // Paused, or over: nobody is expected to work on it.
        s.apply(&Change::Task(TaskChange::Paused {
            task_id: "idle".into(),
            paused: true,
        }));
        assert!(idle_tasks(&s).is_empty());
    }
}
