//! When each step, stage and task started and ended, read from the times of the changes that
//! started and ended it. Kept beside the states, not in them (a state stays exactly what its
//! owner holds), and merged into a state as clients read it (`started_at`, `ended_at`, ms since
//! the Unix epoch), so the console and REST can show durations, elapsed times and timelines.

use super::{Change, StageChange, StepChange, TaskChange};
use crate::ids::{StageId, StepId, TaskId};
use crate::state::ExecutionState;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::Hash;

/// When one step, stage or task started and ended, as far as known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Times {
    /// A step: when it was added to its agent's queue (ms since the Unix epoch); lists of
    /// steps are in this order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<i64>,
    /// When it started (ms since the Unix epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    /// When it ended (ms since the Unix epoch), once it is over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
    /// A graph plan's step: when the last step it waited for finished and it became ready
    /// (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<i64>,
    /// When the step last began to wait for a person's verdict (a plan check, an approval,
    /// parameters), so a timeline draws that time as waiting, not running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_from: Option<i64>,
    /// When that wait ended (absent while it lasts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_to: Option<i64>,
}

/// The times of the steps, stages and tasks the states still hold.
#[derive(Debug, Default)]
pub struct Clock {
    steps: HashMap<StepId, Times>,
    stages: HashMap<StageId, Times>,
    tasks: HashMap<TaskId, Times>,
}

impl Clock {
    /// Notes what `c`, published at `at`, says about a start or an end. A step approved after
    /// waiting keeps its first start; a task starts when it is created, a stage when it runs.
    pub fn note(&mut self, c: &Change, at: i64) {
        match c {
            Change::Step(StepChange::Added { step, .. }) => {
                let t = self.steps.entry(step.step_id.clone()).or_default();
                t.created_at.get_or_insert(at);
            }
            Change::Step(StepChange::Started { step_id, .. }) => {
                start(&mut self.steps, step_id, at);
                // An approved tool call starts again: its wait for the person is over.
                end_wait(self.steps.get_mut(step_id), at);
            }
            Change::Step(StepChange::Updated {
                step_id, update, ..
            }) => {
                if let Some(state) = update.execution_state {
                    self.step_state(step_id, state, at);
                }
            }
            Change::Task(TaskChange::Created { task }) => start(&mut self.tasks, &task.task_id, at),
            Change::Task(TaskChange::State {
                task_id,
                execution_state,
                ..
            }) if execution_state.is_over() => end(&mut self.tasks, task_id, at),
            Change::Stage(StageChange::State {
                stage_id,
                execution_state,
            }) => match execution_state {
                ExecutionState::Running => start(&mut self.stages, stage_id, at),
                s if s.is_over() => end(&mut self.stages, stage_id, at),
                _ => {}
            },
            _ => {}
        }
    }

    /// A step's state changed to `state` at `at`: it ended, became ready, or began or stopped
    /// waiting for a person.
    fn step_state(&mut self, id: &StepId, state: crate::state::StepExecutionState, at: i64) {
        use crate::state::StepExecutionState::Init;
        let t = self.steps.entry(id.clone()).or_default();
        if state.waits_for_a_person() {
            t.waited_from = Some(at);
            t.waited_to = None;
            return;
        }
        end_wait(Some(&mut *t), at);
        if state.is_over() {
            t.ended_at = Some(at);
        } else if state == Init {
            // A queued step goes back to `init` only from `pending`: it became ready.
            t.ready_at = Some(at);
        }
    }

    /// The step's times, if it is timed.
    pub fn step(&self, id: &StepId) -> Option<Times> {
        self.steps.get(id).copied()
    }

    /// When the step was created, for ordering lists of steps: when it was added, else (a
    /// step stored before that was noted) when it started; `None` for a step not timed.
    pub fn step_created(&self, id: &StepId) -> Option<i64> {
        self.steps
            .get(id)
            .map(|t| t.created_at.or(t.started_at).unwrap_or(0))
    }

    /// The stage's times, if it is timed.
    pub fn stage(&self, id: &StageId) -> Option<Times> {
        self.stages.get(id).copied()
    }

    /// The task's times, if it is timed.
    pub fn task(&self, id: &TaskId) -> Option<Times> {
        self.tasks.get(id).copied()
    }

    /// How many steps, stages and tasks it times.
    pub fn len(&self) -> usize {
        self.steps.len() + self.stages.len() + self.tasks.len()
    }

    /// Whether it times nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the steps, stages and tasks the states let go.
    pub fn retain(
        &mut self,
        step: impl Fn(&StepId) -> bool,
        stage: impl Fn(&StageId) -> bool,
        task: impl Fn(&TaskId) -> bool,
    ) {
        self.steps.retain(|id, _| step(id));
        self.stages.retain(|id, _| stage(id));
        self.tasks.retain(|id, _| task(id));
    }

    /// The clock as the store keeps it, each list sorted by id.
    pub fn record(&self) -> TimesRecord {
        fn list<K: Clone + Ord>(m: &HashMap<K, Times>) -> Vec<(K, Times)> {
            let mut v: Vec<_> = m.iter().map(|(k, t)| (k.clone(), *t)).collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        }
        TimesRecord {
            steps: list(&self.steps),
            stages: list(&self.stages),
            tasks: list(&self.tasks),
        }
    }

    /// The clock again from the store's record.
    pub fn restore(r: TimesRecord) -> Self {
        Clock {
            steps: r.steps.into_iter().collect(),
            stages: r.stages.into_iter().collect(),
            tasks: r.tasks.into_iter().collect(),
        }
    }
}

/// The clock as the store keeps it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimesRecord {
    /// The steps' times.
    pub steps: Vec<(StepId, Times)>,
    /// The stages' times.
    pub stages: Vec<(StageId, Times)>,
    /// The tasks' times.
    pub tasks: Vec<(TaskId, Times)>,
}

fn start<K: Clone + Eq + Hash>(m: &mut HashMap<K, Times>, id: &K, at: i64) {
    m.entry(id.clone())
        .or_default()
        .started_at
        .get_or_insert(at);
}

/// A wait for a person that lasts ends at `at`.
fn end_wait(t: Option<&mut Times>, at: i64) {
    if let Some(t) = t
        && t.waited_from.is_some()
        && t.waited_to.is_none()
    {
        t.waited_to = Some(at);
    }
}

fn end<K: Clone + Eq + Hash>(m: &mut HashMap<K, Times>, id: &K, at: i64) {
    m.entry(id.clone()).or_default().ended_at = Some(at);
}

/// A state as clients read it: its fields with its times.
pub fn with_times(
    state: &impl Serialize,
    times: Option<Times>,
) -> serde_json::Result<serde_json::Value> {
    let mut v = serde_json::to_value(state)?;
    if let (Some(t), Some(o)) = (times, v.as_object_mut()) {
        if let Some(c) = t.created_at {
            o.insert("created_at".into(), c.into());
        }
        if let Some(s) = t.started_at {
            o.insert("started_at".into(), s.into());
        }
        if let Some(e) = t.ended_at {
            o.insert("ended_at".into(), e.into());
        }
        if let Some(r) = t.ready_at {
            o.insert("ready_at".into(), r.into());
        }
        if let Some(w) = t.waited_from {
            o.insert("waited_from".into(), w.into());
        }
        if let Some(w) = t.waited_to {
            o.insert("waited_to".into(), w.into());
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::StepUpdate;
    use crate::state::StepExecutionState;

    fn started(id: &str) -> Change {
        Change::Step(StepChange::Started {
            agent_id: "a".into(),
            step_id: id.into(),
        })
    }

    fn ended(id: &str, state: StepExecutionState) -> Change {
        Change::Step(StepChange::Updated {
            agent_id: "a".into(),
            step_id: id.into(),
            update: StepUpdate {
                execution_state: Some(state),
                ..Default::default()
            },
        })
    }

    #[test]
    fn a_step_gets_its_start_and_end_once() {
        let mut c = Clock::default();
        c.note(&started("s"), 100);
        c.note(&ended("s", StepExecutionState::WaitingForApproval), 150);
        c.note(&started("s"), 200);
        c.note(&ended("s", StepExecutionState::Finished), 900);
        assert_eq!(
            c.step(&"s".into()),
            Some(Times {
                created_at: None,
                started_at: Some(100),
                ended_at: Some(900),
                ready_at: None,
                // It waited for the person from 150 until it started again at 200.
                waited_from: Some(150),
                waited_to: Some(200),
            })
        );
        c.retain(|_| false, |_| true, |_| true);
        assert!(c.is_empty());
    }

    #[test]
    fn a_plan_check_is_timed_as_a_wait_until_the_person_decides() {
        let mut c = Clock::default();
        c.note(&started("p"), 100);
        c.note(&ended("p", StepExecutionState::WaitingForApproval), 300);
        let t = c.step(&"p".into()).unwrap();
        assert_eq!(
            (t.waited_from, t.waited_to, t.ended_at),
            (Some(300), None, None)
        );
        c.note(&ended("p", StepExecutionState::Finished), 5_300);
        let t = c.step(&"p".into()).unwrap();
        assert_eq!(
            (t.waited_from, t.waited_to, t.ended_at),
            (Some(300), Some(5_300), Some(5_300))
        );
    }

    #[test]
    fn a_pending_step_notes_when_it_became_ready() {
        let mut c = Clock::default();
        let ready = Change::Step(StepChange::Updated {
            agent_id: "a".into(),
            step_id: "s".into(),
            update: crate::event::StepUpdate {
                execution_state: Some(StepExecutionState::Init),
                ..Default::default()
            },
        });
        c.note(&ready, 50);
        c.note(&started("s"), 60);
        let t = c.step(&"s".into()).unwrap();
        assert_eq!((t.ready_at, t.started_at), (Some(50), Some(60)));
    }

    #[test]
    fn a_task_runs_from_its_creation_and_a_stage_from_its_start_to_their_ends() {
        let mut c = Clock::default();
        let task = crate::state::TaskState::new("t".into(), "n".into(), "i".into(), "m".into());
        c.note(
            &Change::Task(TaskChange::Created {
                task: Box::new(task),
            }),
            10,
        );
        let stage = |state| {
            Change::Stage(StageChange::State {
                stage_id: "s".into(),
                execution_state: state,
            })
        };
        c.note(&stage(ExecutionState::Init), 15);
        c.note(&stage(ExecutionState::Running), 20);
        assert_eq!(c.stage(&"s".into()).unwrap().ended_at, None);
        c.note(&stage(ExecutionState::Finished), 80);
        c.note(
            &Change::Task(TaskChange::State {
                task_id: "t".into(),
                execution_state: ExecutionState::Finished,
                task_summary: None,
                summary_written: None,
                outcome: None,
            }),
            90,
        );
        let t = |a, b| {
            Some(Times {
                started_at: Some(a),
                ended_at: Some(b),
                ..Times::default()
            })
        };
        assert_eq!(c.stage(&"s".into()), t(20, 80));
        assert_eq!(c.task(&"t".into()), t(10, 90));
        let r = c.record();
        assert_eq!(
            Clock::restore(r.clone()).record(),
            r,
            "kept as the store keeps it"
        );
        c.retain(|_| true, |_| false, |_| false);
        assert!(c.is_empty());
    }
}
