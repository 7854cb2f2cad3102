//! StepLock: the wait ids an agent holds while it waits for replies. Each wait remembers the
//! task and stage it was taken in, so finishing that stage or task frees it (a wait must never
//! outlive the work it belonged to); whom it waits for, so only that one's reply frees it (a
//! wait id copied into someone else's message frees nothing); and when it gives up, so no
//! wait lasts for ever (`WaitPatience`).

use crate::ids::{AgentId, StageRef, TaskId, WaitId};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// One wait on the lock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// The wait id a reply must return to release the wait.
    pub id: WaitId,
    /// The task it was taken in; finishing the task frees it.
    pub task: TaskId,
    /// The stage it was taken in; finishing the stage frees it.
    pub stage: StageRef,
    /// The one whose reply releases it. `None` only for a wait stored before waits named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<AgentId>,
    /// When it gives up, in milliseconds since the Unix epoch (`None`: a wait stored before
    /// waits had deadlines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<i64>,
}

/// How long an agent waits for a reply before it gives up and decides what to do without it
/// (`waits:` in the team file): people get longer than agents.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitPatience {
    /// How long a wait for a person's reply lasts.
    pub human: Duration,
    /// How long a wait for an agent's reply lasts.
    pub agent: Duration,
    /// How long a step waits for its model's endpoint to answer again (`waits.model_secs`).
    pub model: Duration,
    /// How long a served team's open task may have nobody working in it before the person
    /// whose goal it serves is told it stalled (`waits.stall_secs`).
    pub stall: Duration,
    /// The team's human agents (the rest are agents or the runtime).
    pub humans: Arc<BTreeSet<AgentId>>,
}

impl Default for WaitPatience {
    fn default() -> Self {
        WaitPatience {
            human: Duration::from_secs(30 * 60),
            agent: Duration::from_secs(10 * 60),
            model: Duration::from_secs(30 * 60),
            stall: Duration::from_secs(10 * 60),
            humans: Arc::default(),
        }
    }
}

impl WaitPatience {
    /// How long a wait for `receiver`'s reply lasts.
    pub fn for_receiver(&self, receiver: &AgentId) -> Duration {
        if self.humans.contains(receiver) {
            self.human
        } else {
            self.agent
        }
    }
}

/// The agent's `step_lock`: the waits it holds; it runs no step while one is held.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepLock {
    waits: Vec<Wait>,
}

impl StepLock {
    /// A lock as the store keeps it.
    pub fn from_parts(waits: impl IntoIterator<Item = Wait>) -> Self {
        StepLock {
            waits: waits.into_iter().collect(),
        }
    }

    /// The waits held, oldest first.
    pub fn waits(&self) -> &[Wait] {
        &self.waits
    }

    /// Whether no wait is held (the agent may run its next step).
    pub fn is_empty(&self) -> bool {
        self.waits.is_empty()
    }

    /// How many waits are held.
    pub fn len(&self) -> usize {
        self.waits.len()
    }

    /// The wait ids held.
    pub fn ids(&self) -> impl Iterator<Item = &WaitId> {
        self.waits.iter().map(|w| &w.id)
    }

    /// Whether the wait `id` is held, whoever it waits for.
    pub fn holds(&self, id: &WaitId) -> bool {
        self.waits.iter().any(|w| &w.id == id)
    }

    /// Whether `id` is held and `sender` is the one it waits for: the only reply that frees it.
    pub fn answered_by(&self, id: &WaitId, sender: &AgentId) -> bool {
        self.waits
            .iter()
            .any(|w| &w.id == id && w.from.as_ref().is_none_or(|f| f == sender))
    }

    /// Whether any wait was taken in this task and stage.
    pub fn holds_in(&self, task: &TaskId, stage: &StageRef) -> bool {
        self.waits
            .iter()
            .any(|w| &w.task == task && &w.stage == stage)
    }

    /// The soonest moment a wait gives up.
    pub fn next_deadline(&self) -> Option<i64> {
        self.waits.iter().filter_map(|w| w.until).min()
    }

    /// The waits whose time is up at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Vec<Wait> {
        self.waits
            .iter()
            .filter(|w| w.until.is_some_and(|u| u <= now_ms))
            .cloned()
            .collect()
    }

    /// Holds the step for these waits (replies, approvals) until each is released or expires.
    pub fn hold(&mut self, waits: impl IntoIterator<Item = Wait>) {
        self.waits.extend(waits);
    }

    /// Frees one wait id; false when it was not held (a late or duplicate reply).
    pub fn release(&mut self, id: &WaitId) -> bool {
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

    pub fn wait(id: &str, task: &str, stage: &StageRef) -> Wait {
        Wait {
            id: id.into(),
            task: task.into(),
            stage: stage.clone(),
            from: None,
            until: None,
        }
    }

    #[test]
    fn waits_are_found_by_the_stage_or_task_they_were_taken_in() {
        let s1 = StageRef::Stage(StageId::from("s1"));
        let s2 = StageRef::Stage(StageId::from("s2"));
        let mut l = StepLock::default();
        l.hold([wait("a", "t", &s1)]);
        l.hold([wait("b", "t", &s2)]);
        l.hold([wait("c", "u", &s1)]);
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
    fn only_the_one_waited_for_answers_a_wait() {
        let mut l = StepLock::default();
        l.hold([Wait {
            from: Some("writer".into()),
            ..wait("w", "t", &StageRef::NoRelative)
        }]);
        assert!(l.answered_by(&"w".into(), &"writer".into()));
        assert!(!l.answered_by(&"w".into(), &"reviewer".into()));
        assert!(!l.answered_by(&"x".into(), &"writer".into()));
    }

    #[test]
    fn waits_give_up_at_their_deadline() {
        let mut l = StepLock::default();
        let s = StageRef::NoRelative;
        l.hold([
            Wait {
                until: Some(2_000),
                ..wait("late", "t", &s)
            },
            Wait {
                until: Some(1_000),
                ..wait("soon", "t", &s)
            },
            wait("old", "t", &s),
        ]);
        assert_eq!(l.next_deadline(), Some(1_000));
        assert!(l.expired(999).is_empty());
        let ids = |ws: Vec<Wait>| ws.into_iter().map(|w| w.id).collect::<Vec<_>>();
        assert_eq!(ids(l.expired(1_000)), [WaitId::from("soon")]);
        assert_eq!(ids(l.expired(5_000)).len(), 2);
    }

    #[test]
    fn patience_is_longer_for_people() {
        let p = WaitPatience {
            humans: Arc::new(["alice".into()].into_iter().collect()),
            ..WaitPatience::default()
        };
        assert_eq!(p.for_receiver(&"alice".into()), Duration::from_secs(1800));
        assert_eq!(p.for_receiver(&"writer".into()), Duration::from_secs(600));
    }

    #[test]
    fn a_wait_stored_before_waits_had_a_sender_and_deadline_still_loads() {
        let old: Wait = serde_json::from_str(r#"["w1", "t", "no_relative"]"#).unwrap();
        assert_eq!(old, wait("w1", "t", &StageRef::NoRelative));
    }

    #[test]
    fn serializes_as_a_list_of_ids() {
        let mut l = StepLock::default();
        l.hold([
            wait("w1", "t", &StageRef::NoRelative),
            wait("w2", "t", &StageRef::NoRelative),
        ]);
        assert_eq!(
            serde_json::to_value(&l).unwrap(),
            serde_json::json!(["w1", "w2"])
        );
    }
}
