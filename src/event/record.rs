//! The whole of a state, as the store keeps it. The wire form (`Serialize` on the states)
//! follows the SPEC and leaves parts out: an agent lists its steps and waits by id and never
//! shows a person's private pool. A record keeps everything needed to carry on after a
//! restart, and turns back into exactly the state it was made from.

use super::deliveries::{Deliveries, InFlight};
use super::states::{Counters, States, TaskSummaryLine};
use super::times::{Clock, Times, TimesRecord};
use crate::ids::{StageId, StepId, TaskId};
use crate::state::{
    AgentState, AgentStep, ConversationPool, StageState, StepLock, StepState, TaskState, Wait,
};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// One agent in full: its wire state plus what the wire leaves out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub agent: AgentState,
    pub steps: Vec<StepState>,
    pub todo: VecDeque<StepId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut_loose: Vec<StepId>,
    /// Records made before waits named their sender and deadline kept `[id, task, stage]`;
    /// a `Wait` reads that form too (its later fields default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<Wait>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_pool: Option<ConversationPool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_goals: Vec<(TaskId, StageId)>,
}

impl AgentRecord {
    pub fn of(agent: &AgentState) -> Self {
        let (steps, todo, cut_loose) = agent.agent_step.parts();
        AgentRecord {
            agent: agent.clone(),
            steps: steps.to_vec(),
            todo: todo.clone(),
            cut_loose: cut_loose.to_vec(),
            waits: agent.step_lock.waits().to_vec(),
            conversation_pool: agent.conversation_pool.clone(),
            open_goals: agent.open_goals.iter().cloned().collect(),
        }
    }

    pub fn into_state(self) -> AgentState {
        let mut a = self.agent;
        a.agent_step = AgentStep::from_parts(self.steps, self.todo, self.cut_loose);
        a.step_lock = StepLock::from_parts(self.waits);
        a.conversation_pool = self.conversation_pool;
        a.open_goals = self.open_goals.into_iter().collect();
        a
    }
}

/// A reader's whole copy of the team at one version: what a store snapshot holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatesRecord {
    /// Tasks in the order they were created.
    pub tasks: Vec<TaskState>,
    pub stages: Vec<StageState>,
    pub agents: Vec<AgentRecord>,
    /// Steps that left their agent, oldest first (their tasks are in `tasks`).
    pub retired: Vec<StepState>,
    pub summaries: Vec<TaskSummaryLine>,
    pub steps_run: u64,
    /// Messages routed but not yet taken by every receiver, oldest first.
    #[serde(default)]
    pub in_flight: Vec<InFlight>,
    /// The newest message number routed.
    #[serde(default)]
    pub last_message_no: u64,
    /// When the steps held started and ended (kept under this name before stages and tasks
    /// were timed too).
    #[serde(default)]
    pub step_times: Vec<(StepId, Times)>,
    #[serde(default)]
    pub stage_times: Vec<(StageId, Times)>,
    #[serde(default)]
    pub task_times: Vec<(TaskId, Times)>,
}

impl StatesRecord {
    pub fn of(states: &States) -> Self {
        let times = states.times.record();
        StatesRecord {
            tasks: states.tasks_in_order().into_iter().cloned().collect(),
            stages: states.stages.values().cloned().collect(),
            agents: states.agents.values().map(AgentRecord::of).collect(),
            retired: states.retired_in_order().cloned().collect(),
            summaries: states.summaries().cloned().collect(),
            steps_run: states.counters().steps_run,
            in_flight: states.deliveries.in_flight().collect(),
            last_message_no: states.deliveries.last_no(),
            step_times: times.steps,
            stage_times: times.stages,
            task_times: times.tasks,
        }
    }

    pub fn into_states(self) -> States {
        let mut states = States::restore(
            self.tasks,
            self.stages,
            self.agents.into_iter().map(AgentRecord::into_state),
            self.retired,
            self.summaries,
            Counters {
                steps_run: self.steps_run,
                ..Counters::default()
            },
        );
        states.deliveries = Deliveries::restore(self.in_flight, self.last_message_no);
        states.times = Clock::restore(TimesRecord {
            steps: self.step_times,
            stages: self.stage_times,
            tasks: self.task_times,
        });
        states
    }
}
