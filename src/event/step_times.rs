//! When each step started and ended, read from the times of the changes that started and
//! ended it. Kept beside the states, not in them (an agent's state stays exactly what its actor
//! holds), and merged into a step as clients read it (`started_at`, `ended_at`, ms since the
//! Unix epoch), so the console and REST can show durations and timelines.

use super::{Change, StepChange};
use crate::ids::StepId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepTimes {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
}

/// The times of the steps the states still hold.
#[derive(Debug, Default)]
pub struct StepClock {
    times: HashMap<StepId, StepTimes>,
}

impl StepClock {
    /// Notes what `c`, published at `at`, says about a step's start or end. A step approved
    /// after waiting keeps its first start.
    pub fn note(&mut self, c: &Change, at: i64) {
        match c {
            Change::Step(StepChange::Started { step_id, .. }) => {
                self.times
                    .entry(step_id.clone())
                    .or_default()
                    .started_at
                    .get_or_insert(at);
            }
            Change::Step(StepChange::Updated {
                step_id, update, ..
            }) if update.execution_state.is_some_and(|s| s.is_over()) => {
                self.times.entry(step_id.clone()).or_default().ended_at = Some(at);
            }
            _ => {}
        }
    }

    pub fn get(&self, id: &StepId) -> Option<StepTimes> {
        self.times.get(id).copied()
    }

    pub fn len(&self) -> usize {
        self.times.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Forgets the steps `keep` no longer wants (those the states let go).
    pub fn retain(&mut self, keep: impl Fn(&StepId) -> bool) {
        self.times.retain(|id, _| keep(id));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&StepId, &StepTimes)> {
        self.times.iter()
    }

    pub fn restore(times: impl IntoIterator<Item = (StepId, StepTimes)>) -> Self {
        StepClock {
            times: times.into_iter().collect(),
        }
    }
}

/// A step as clients read it: its state with its times.
pub fn with_times(
    step: &crate::state::StepState,
    times: Option<StepTimes>,
) -> serde_json::Result<serde_json::Value> {
    let mut v = serde_json::to_value(step)?;
    if let (Some(t), Some(o)) = (times, v.as_object_mut()) {
        if let Some(s) = t.started_at {
            o.insert("started_at".into(), s.into());
        }
        if let Some(e) = t.ended_at {
            o.insert("ended_at".into(), e.into());
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
        let mut c = StepClock::default();
        c.note(&started("s"), 100);
        c.note(&ended("s", StepExecutionState::WaitingForApproval), 150);
        c.note(&started("s"), 200);
        c.note(&ended("s", StepExecutionState::Finished), 900);
        assert_eq!(
            c.get(&"s".into()),
            Some(StepTimes {
                started_at: Some(100),
                ended_at: Some(900)
            })
        );
        c.retain(|_| false);
        assert!(c.is_empty());
    }
}
