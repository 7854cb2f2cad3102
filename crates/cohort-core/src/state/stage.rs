//! StageState: one sub-goal of a task, its allocation and each allocated agent's progress.

use super::{ExecutionState, StageAgentState};
use crate::event::StageChange;
use crate::ids::{AgentId, StageId, TaskId};
use crate::message::CompletionUpdate;
use crate::report::Written;
use crate::texts::Texts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One stage of a task (SPEC §2 StageState); SyncState is its only writer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageState {
    /// The task the stage belongs to.
    pub task_id: TaskId,
    /// The stage's own id, unique across tasks.
    pub stage_id: StageId,
    /// The stage's sub-goal.
    pub stage_intention: String,
    /// `{agent_id: that agent's goal in this stage}`.
    pub agent_allocation: BTreeMap<AgentId, String>,
    /// Where the stage is in its lifecycle.
    pub execution_state: ExecutionState,
    /// Each allocated agent's progress in the stage.
    pub every_agent_state: BTreeMap<AgentId, StageAgentState>,
    /// The completion summaries submitted so far, by agent, in the agents' own words.
    pub completion_summary: BTreeMap<AgentId, String>,
    /// What each reporting agent's work steps produced (see `CompletionUpdate::results`): the
    /// results a task's summary is checked against, beside the agents' own words.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub completion_results: BTreeMap<AgentId, Vec<String>>,
    /// The reports the runtime added to or composed (see `CompletionUpdate::written`); an
    /// agent not here wrote its own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub completion_written: BTreeMap<AgentId, Written>,
    /// The stage this one tries again (`retry_stage`), if it is a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<StageId>,
}

impl StageState {
    /// A new stage in `init`, with a fresh id and every allocated agent idle.
    pub fn new(
        task_id: TaskId,
        stage_intention: String,
        agent_allocation: BTreeMap<AgentId, String>,
    ) -> Self {
        let every_agent_state = agent_allocation
            .keys()
            .map(|a| (a.clone(), StageAgentState::Idle))
            .collect();
        StageState {
            task_id,
            stage_id: StageId::random(),
            stage_intention,
            agent_allocation,
            execution_state: ExecutionState::Init,
            every_agent_state,
            completion_summary: BTreeMap::new(),
            completion_results: BTreeMap::new(),
            completion_written: BTreeMap::new(),
            retry_of: None,
        }
    }

    /// The change that records an allocated agent's progress, if it changes anything. Agents
    /// not allocated here are ignored (a manager handling the stage's completion notice works
    /// "in" the stage without being part of it). A finished agent stays finished unless it
    /// failed afterwards; a failed one stays failed until its summary arrives.
    pub fn agent_state_change(
        &self,
        agent: &AgentId,
        state: StageAgentState,
    ) -> Option<StageChange> {
        let now = *self.every_agent_state.get(agent)?;
        let keep = matches!(now, StageAgentState::Finished | StageAgentState::Failed)
            && state == StageAgentState::Working;
        (!keep && now != state).then(|| StageChange::Agent {
            stage_id: self.stage_id.clone(),
            agent_id: agent.clone(),
            state,
        })
    }

    /// The change that stores an allocated agent's completion summary (None for an agent not
    /// allocated here).
    pub fn completion_change(&self, c: &CompletionUpdate) -> Option<StageChange> {
        self.agent_allocation
            .contains_key(&c.agent_id)
            .then(|| StageChange::Completion {
                stage_id: self.stage_id.clone(),
                agent_id: c.agent_id.clone(),
                summary: c.completion_summary.clone(),
                results: c.results.clone(),
                written: c.written,
            })
    }

    /// `agent`'s completion report as people and models read it (see [`Written::render`]),
    /// if it gave one.
    pub fn report_of(&self, agent: &AgentId, t: &Texts) -> Option<String> {
        let summary = self.completion_summary.get(agent)?;
        let written = self
            .completion_written
            .get(agent)
            .copied()
            .unwrap_or_default();
        let results = self
            .completion_results
            .get(agent)
            .map_or(&[][..], Vec::as_slice);
        Some(written.render(agent, summary, results, t))
    }

    /// Whether every allocated agent submitted its completion summary.
    pub fn is_complete(&self) -> bool {
        !self.agent_allocation.is_empty()
            && self
                .agent_allocation
                .keys()
                .all(|a| self.completion_summary.contains_key(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::apply_stage;

    fn stage() -> StageState {
        let alloc = [("a".into(), "do A".into()), ("b".into(), "do B".into())]
            .into_iter()
            .collect();
        StageState::new("t".into(), "goal".into(), alloc)
    }

    /// Records a summary as SyncState does; true when it completes the stage.
    fn complete(s: &mut StageState, agent: &str, text: &str) -> bool {
        let was = s.is_complete();
        let update = CompletionUpdate {
            task_id: s.task_id.clone(),
            stage_id: s.stage_id.clone(),
            agent_id: agent.into(),
            completion_summary: text.into(),
            results: Vec::new(),
            written: Written::Own,
        };
        match s.completion_change(&update) {
            Some(c) => apply_stage(s, &c),
            None => return false,
        }
        !was && s.is_complete()
    }

    fn set(s: &mut StageState, agent: &str, state: StageAgentState) -> bool {
        match s.agent_state_change(&agent.into(), state) {
            Some(c) => {
                apply_stage(s, &c);
                true
            }
            None => false,
        }
    }

    #[test]
    fn stage_completes_exactly_once_when_every_allocated_agent_has_a_summary() {
        let mut s = stage();
        assert!(!complete(&mut s, "a", "done a"));
        assert!(!complete(&mut s, "stranger", "x"));
        assert!(complete(&mut s, "b", "done b"));
        assert!(!complete(&mut s, "b", "again"));
        assert_eq!(
            s.every_agent_state[&AgentId::from("a")],
            StageAgentState::Finished
        );
    }

    #[test]
    fn agent_state_ignores_unallocated_agents_and_keeps_finished() {
        let mut s = stage();
        assert!(set(&mut s, "a", StageAgentState::Working));
        assert!(!set(&mut s, "a", StageAgentState::Working), "no change");
        assert!(!set(&mut s, "m", StageAgentState::Working));
        assert!(!s.every_agent_state.contains_key(&AgentId::from("m")));
        complete(&mut s, "a", "x");
        assert!(!set(&mut s, "a", StageAgentState::Working));
        assert!(set(&mut s, "a", StageAgentState::Failed));
        assert!(set(&mut s, "b", StageAgentState::Failed));
        assert!(
            !set(&mut s, "b", StageAgentState::Working),
            "a failure stays visible"
        );
        complete(&mut s, "b", "recovered");
        assert_eq!(
            s.every_agent_state[&AgentId::from("b")],
            StageAgentState::Finished
        );
    }
}
