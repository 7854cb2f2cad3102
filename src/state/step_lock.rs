//! StepLock: the wait ids an agent holds while it waits for replies. Each wait remembers the
//! task and stage it was taken in, so finishing that stage or task frees it; a wait must
//! never outlive the work it belonged to, or the agent would stay blocked for good.

use crate::ids::{StageRef, TaskId, WaitId};
use serde::{Serialize, Serializer};

#[derive(Clone, Debug, PartialEq)]
struct Wait {
    id: WaitId,
    task: TaskId,
    stage: StageRef,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepLock {
    waits: Vec<Wait>,
}

impl StepLock {
    /// A lock as the store keeps it: each wait id with the task and stage it was taken in.
    pub fn from_parts(waits: impl IntoIterator<Item = (WaitId, TaskId, StageRef)>) -> Self {
        StepLock {
            waits: waits
                .into_iter()
                .map(|(id, task, stage)| Wait { id, task, stage })
                .collect(),
        }
    }

    pub fn parts(&self) -> impl Iterator<Item = (&WaitId, &TaskId, &StageRef)> {
        self.waits.iter().map(|w| (&w.id, &w.task, &w.stage))
    }

    pub fn is_empty(&self) -> bool {
        self.waits.is_empty()
    }

    pub fn len(&self) -> usize {
        self.waits.len()
    }

    pub fn ids(&self) -> impl Iterator<Item = &WaitId> {
        self.waits.iter().map(|w| &w.id)
    }

    pub fn holds(&self, id: &WaitId) -> bool {
        self.waits.iter().any(|w| &w.id == id)
    }

    /// Whether any wait was taken in this task and stage.
    pub fn holds_in(&self, task: &TaskId, stage: &StageRef) -> bool {
        self.waits
            .iter()
            .any(|w| &w.task == task && &w.stage == stage)
    }

    /// Takes wait ids for a message sent from `task`/`stage`.
    pub(crate) fn hold(
        &mut self,
        ids: impl IntoIterator<Item = WaitId>,
        task: &TaskId,
        stage: &StageRef,
    ) {
        for id in ids {
            self.waits.push(Wait {
                id,
                task: task.clone(),
                stage: stage.clone(),
            });
        }
    }

    /// Frees one wait id; false when it was not held (a late or duplicate reply).
    pub(crate) fn release(&mut self, id: &WaitId) -> bool {
        let before = self.waits.len();
        self.waits.retain(|w| &w.id != id);
        before != self.waits.len()
    }

    /// The waits taken in a stage (`Some`) or in a whole task (`None`).
    pub fn ids_in(&self, task: &TaskId, stage: Option<&StageRef>) -> Vec<WaitId> {
        self.waits
            .iter()
            .filter(|w| &w.task == task && stage.is_none_or(|s| &w.stage == s))
            .map(|w| w.id.clone())
            .collect()
    }
}

/// On the wire the lock is the list of wait ids (SPEC: `step_lock [wait_id]`).
impl Serialize for StepLock {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.ids())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageId;

    #[test]
    fn waits_are_found_by_the_stage_or_task_they_were_taken_in() {
        let s1 = StageRef::Stage(StageId::from("s1"));
        let s2 = StageRef::Stage(StageId::from("s2"));
        let mut l = StepLock::default();
        l.hold(["a".into()], &"t".into(), &s1);
        l.hold(["b".into()], &"t".into(), &s2);
        l.hold(["c".into()], &"u".into(), &s1);
        assert_eq!(l.ids_in(&"t".into(), Some(&s1)), [WaitId::from("a")]);
        assert_eq!(l.ids_in(&"t".into(), None).len(), 2);
        for id in l.ids_in(&"t".into(), None) {
            l.release(&id);
        }
        assert_eq!(l.ids().collect::<Vec<_>>(), [&WaitId::from("c")]);
        assert!(l.release(&"c".into()));
        assert!(!l.release(&"c".into()));
        assert!(l.is_empty());
    }

    #[test]
    fn serializes_as_a_list_of_ids() {
        let mut l = StepLock::default();
        l.hold(
            ["w1".into(), "w2".into()],
            &"t".into(),
            &StageRef::NoRelative,
        );
        assert_eq!(
            serde_json::to_value(&l).unwrap(),
            serde_json::json!(["w1", "w2"])
        );
    }
}
