//! The plain model the property test checks an agent against: the steps it should hold, in
//! order and phase, its working memory and waits, by the simplest rules that say them.

use super::{Finish, Work, blank_step, finish_ids};
use crate::ids::{StepId, WaitId};
use crate::state::{StepState, WorkingMemory};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Phase {
    Pending,
    Running,
    Over,
}

pub(super) struct ModelStep {
    pub(super) id: StepId,
    pub(super) work: Work,
    pub(super) phase: Phase,
}

/// What the agent should look like, kept by the simplest rules that say it.
#[derive(Default)]
pub(super) struct Model {
    /// The expected `step_list`, in order.
    pub(super) steps: Vec<ModelStep>,
    pub(super) working_memory: WorkingMemory,
    pub(super) waits: Vec<(WaitId, Work)>,
    /// The running step whose stage or task was finished while it ran.
    pub(super) cut_loose: Option<StepId>,
    /// Ids of the steps still listed, in the order they started: `step_list` must be this,
    /// then the pending steps (the execution order).
    pub(super) started: Vec<StepId>,
    pub(super) next_id: usize,
    pub(super) next_wait: usize,
}

impl Model {
    pub(super) fn running(&self) -> Option<&ModelStep> {
        self.steps.iter().find(|s| s.phase == Phase::Running)
    }

    pub(super) fn pending(&self) -> impl Iterator<Item = &ModelStep> {
        self.steps.iter().filter(|s| s.phase == Phase::Pending)
    }

    /// Fresh steps with readable ids (`t1/s2#7`), recorded in working memory.
    pub(super) fn new_steps(&mut self, works: &[Work]) -> (Vec<StepState>, Vec<ModelStep>) {
        let mut states = Vec::new();
        let mut model = Vec::new();
        for &work in works {
            self.next_id += 1;
            let id = StepId::from(format!("{work:?}#{}", self.next_id));
            let (task, stage) = work.ids();
            let (task, stage) = (task.clone(), stage.clone());
            self.working_memory
                .entry(task.clone())
                .or_default()
                .entry(stage.clone())
                .or_default()
                .push(id.clone());
            states.push(StepState {
                task_id: task,
                stage_id: stage,
                step_id: id.clone(),
                ..blank_step()
            });
            model.push(ModelStep {
                id,
                work,
                phase: Phase::Pending,
            });
        }
        (states, model)
    }

    /// Drops the steps of the finished work but the running one, which is cut loose.
    /// Finishes a stage or task; returns the steps it drops that never ran.
    pub(super) fn finish(&mut self, (task, stage): Finish) -> Vec<StepId> {
        let hit = |w: Work| w.task == task && stage.is_none_or(|s| w.stage == s);
        let mut dropped = Vec::new();
        let mut never_ran = Vec::new();
        for s in &self.steps {
            if hit(s.work) {
                if s.phase == Phase::Running {
                    self.cut_loose = Some(s.id.clone());
                } else {
                    dropped.push(s.id.clone());
                    if s.phase == Phase::Pending {
                        never_ran.push(s.id.clone());
                    }
                }
            }
        }
        self.steps.retain(|s| !dropped.contains(&s.id));
        self.started.retain(|id| !dropped.contains(id));
        match finish_ids((task, stage)) {
            (t, Some(s)) => self.working_memory.get_mut(t).map(|t| t.remove(s)),
            (t, None) => self.working_memory.remove(t).map(|_| None),
        };
        self.waits.retain(|(_, w)| !hit(*w));
        never_ran
    }
}
