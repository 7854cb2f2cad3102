//! A task's record once compaction prunes its events: its state and stages as of the newest
//! event folded into them. A reader of a task (`stored_task`, `cohort export --task`) starts
//! from the record and applies only the task's events after it, so a finished task that left
//! memory is still read whole after its events are gone.

use cohort_core::event::{Change, Event, States, TaskChange};
use cohort_core::ids::TaskId;
use cohort_core::state::{StageState, TaskState};
use serde::{Deserialize, Serialize};

/// A task as the archive keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchivedTask {
    /// The newest event folded in: every event of the task up to it is in this record.
    pub version: u64,
    pub task: TaskState,
    /// Its stages, in the task's order.
    pub stages: Vec<StageState>,
}

/// A task being rebuilt from its record (if any) and its events after it, in order.
pub struct TaskFold {
    task: TaskId,
    states: States,
    version: u64,
}

impl TaskFold {
    /// Starts from `seed`, the task's record, or from nothing.
    pub fn new(task: &TaskId, seed: Option<ArchivedTask>) -> Self {
        let (states, version) = match seed {
            Some(a) => (
                States::restore(
                    vec![a.task],
                    a.stages,
                    [],
                    Vec::new(),
                    Vec::new(),
                    Default::default(),
                ),
                a.version,
            ),
            None => (States::default(), 0),
        };
        TaskFold {
            task: task.clone(),
            states,
            version,
        }
    }

    /// The newest event folded in (0 for none): the caller reads the task's events after it.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Applies one of the task's events; older ones (already in the record) are skipped.
    pub fn apply(&mut self, e: &Event) {
        if e.version <= self.version {
            return;
        }
        self.version = e.version;
        // Its eviction is where memory let it go; the store keeps it whole.
        if !matches!(e.change, Change::Task(TaskChange::Evicted { .. })) {
            self.states.apply_at(&e.change, e.at);
        }
    }

    /// The task and its stages, recorded as of `version` (at least the newest event folded
    /// in); None when nothing of the task was folded.
    pub fn finish(mut self, version: u64) -> Option<ArchivedTask> {
        let task = self.states.tasks.remove(&self.task)?;
        let stages = task
            .stage_list
            .iter()
            .filter_map(|s| self.states.stages.remove(s))
            .collect();
        Some(ArchivedTask {
            version: version.max(self.version),
            task,
            stages,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_core::event::StageChange;
    use cohort_core::state::ExecutionState;

    fn event(version: u64, change: Change) -> Event {
        Event {
            version,
            at: 1_700_000_000_000 + version as i64,
            change,
        }
    }

    #[test]
    fn a_record_and_the_events_after_it_give_what_all_the_events_give() {
        let t: TaskId = "t".into();
        let task = TaskState::new(t.clone(), "n".into(), "i".into(), "m".into());
        let stage = StageState::new(t.clone(), "do it".into(), Default::default());
        let events = [
            event(
                1,
                Change::Task(TaskChange::Created {
                    task: Box::new(task),
                }),
            ),
            event(2, Change::Stage(StageChange::Added { stage, list_at: 0 })),
            event(
                5,
                Change::Task(TaskChange::State {
                    task_id: t.clone(),
                    execution_state: ExecutionState::Finished,
                    task_summary: Some("done".into()),
                    summary_written: None,
                    outcome: None,
                }),
            ),
            event(
                9,
                Change::Task(TaskChange::Evicted {
                    task_id: t.clone(),
                    summary: cohort_core::event::TaskSummaryLine::of(
                        &TaskState::new(t.clone(), "n".into(), "i".into(), "m".into()),
                        &cohort_core::texts::Texts::english(),
                    ),
                }),
            ),
        ];
        let mut whole = TaskFold::new(&t, None);
        events.iter().for_each(|e| whole.apply(e));
        let whole = whole.finish(0).expect("the task");
        assert_eq!(whole.version, 9);
        assert_eq!(whole.task.execution_state, ExecutionState::Finished);
        assert_eq!(whole.stages.len(), 1);

        let mut head = TaskFold::new(&t, None);
        events[..2].iter().for_each(|e| head.apply(e));
        let record = head.finish(3).expect("the task");
        assert_eq!(
            record.version, 3,
            "recorded as of the cut, past its last event"
        );
        let mut tail = TaskFold::new(&t, Some(record));
        // Events the record holds already are skipped, even if read again.
        events.iter().for_each(|e| tail.apply(e));
        assert_eq!(tail.finish(0), Some(whole));
        assert!(TaskFold::new(&t, None).finish(4).is_none());
    }
}
