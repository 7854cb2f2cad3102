//! StageState: one sub-goal of a task, its allocation and each allocated agent's progress.

use super::{ExecutionState, StageAgentState};
use crate::ids::{AgentId, StageId, TaskId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageState {
    pub task_id: TaskId,
    pub stage_id: StageId,
    pub stage_intention: String,
    /// `{agent_id: that agent's goal in this stage}`.
    pub agent_allocation: BTreeMap<AgentId, String>,
    pub execution_state: ExecutionState,
    pub every_agent_state: BTreeMap<AgentId, StageAgentState>,
    pub completion_summary: BTreeMap<AgentId, String>,
}

impl StageState {
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
        }
    }

    /// Records an allocated agent's progress; agents not allocated here are ignored (a manager
    /// handling the stage's completion notice works "in" the stage without being part of it).
    /// A finished agent stays finished unless it failed afterwards; a failed one stays failed
    /// until its summary arrives.
    pub fn set_agent_state(&mut self, agent: &AgentId, state: StageAgentState) -> bool {
        match self.every_agent_state.get_mut(agent) {
            // A finished agent stays finished, and a failure stays visible until the agent
            // summarises, even if later steps of it succeed.
            Some(s)
                if matches!(*s, StageAgentState::Finished | StageAgentState::Failed)
                    && state == StageAgentState::Working =>
            {
                false
            }
            Some(s) => {
                *s = state;
                true
            }
            None => false,
        }
    }

    /// Stores an allocated agent's completion summary; true when this completes the stage
    /// (every allocated agent has now submitted one, and it was not complete before).
    pub fn record_completion(&mut self, agent: &AgentId, summary: String) -> bool {
        if !self.agent_allocation.contains_key(agent) {
            return false;
        }
        let was_complete = self.is_complete();
        self.completion_summary.insert(agent.clone(), summary);
        self.every_agent_state
            .insert(agent.clone(), StageAgentState::Finished);
        !was_complete && self.is_complete()
    }

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

    fn stage() -> StageState {
        let alloc = [("a".into(), "do A".into()), ("b".into(), "do B".into())]
            .into_iter()
            .collect();
        StageState::new("t".into(), "goal".into(), alloc)
    }

    #[test]
    fn stage_completes_exactly_once_when_every_allocated_agent_has_a_summary() {
        let mut s = stage();
        assert!(!s.record_completion(&"a".into(), "done a".into()));
        assert!(!s.record_completion(&"stranger".into(), "x".into()));
        assert!(s.record_completion(&"b".into(), "done b".into()));
        assert!(!s.record_completion(&"b".into(), "again".into()));
        assert_eq!(
            s.every_agent_state[&AgentId::from("a")],
            StageAgentState::Finished
        );
    }

    #[test]
    fn agent_state_ignores_unallocated_agents_and_keeps_finished() {
        let mut s = stage();
        assert!(s.set_agent_state(&"a".into(), StageAgentState::Working));
        assert!(!s.set_agent_state(&"m".into(), StageAgentState::Working));
        assert!(!s.every_agent_state.contains_key(&AgentId::from("m")));
        s.record_completion(&"a".into(), "x".into());
        assert!(!s.set_agent_state(&"a".into(), StageAgentState::Working));
        assert!(s.set_agent_state(&"a".into(), StageAgentState::Failed));
        assert!(s.set_agent_state(&"b".into(), StageAgentState::Failed));
        assert!(
            !s.set_agent_state(&"b".into(), StageAgentState::Working),
            "a failure stays visible"
        );
        s.record_completion(&"b".into(), "recovered".into());
        assert_eq!(
            s.every_agent_state[&AgentId::from("b")],
            StageAgentState::Finished
        );
    }
}
