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
#[cfg(test)]
use std::sync::Arc;

/// One agent in full: its wire state plus what the wire leaves out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The agent's wire state (its steps, waits, private pool and open goals come out empty
    /// when read back; the fields below hold them).
    pub agent: AgentState,
    /// Its steps in execution order (`step_list`).
    pub steps: Vec<StepState>,
    /// The ids of its steps still to run, next first.
    pub todo: VecDeque<StepId>,
    /// Running steps cut loose from work that was finished under them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut_loose: Vec<StepId>,
    /// Records made before waits named their sender and deadline kept `[id, task, stage]`;
    /// a `Wait` reads that form too (its later fields default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<Wait>,
    /// A human's private conversations and notices (never on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_pool: Option<ConversationPool>,
    /// The stages the agent owes a summary in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_goals: Vec<(TaskId, StageId)>,
}

impl AgentRecord {
    /// The whole of `agent`, copied.
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

    /// The agent again, exactly as the record was made from it.
    pub fn into_state(self) -> AgentState {
        let mut a = self.agent;
        a.agent_step = AgentStep::from_parts(self.steps, self.todo, self.cut_loose);
        a.step_lock = StepLock::from_parts(self.waits);
        a.conversation_pool = self.conversation_pool;
        a.open_goals = self.open_goals.into_iter().collect();
        a
    }
}

/// An agent's record as [`AgentRecord`] serialises it, borrowed from the agent.
#[derive(Serialize)]
struct AgentRecordRef<'a> {
    agent: &'a AgentState,
    steps: &'a [StepState],
    todo: &'a VecDeque<StepId>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    cut_loose: &'a [StepId],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    waits: &'a [Wait],
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation_pool: Option<&'a ConversationPool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    open_goals: Vec<&'a (TaskId, StageId)>,
}

impl<'a> AgentRecordRef<'a> {
    fn of(agent: &'a AgentState) -> Self {
        let (steps, todo, cut_loose) = agent.agent_step.parts();
        AgentRecordRef {
            agent,
            steps,
            todo,
            cut_loose,
            waits: agent.step_lock.waits(),
            conversation_pool: agent.conversation_pool.as_ref(),
            open_goals: agent.open_goals.iter().collect(),
        }
    }
}

/// The states as [`StatesRecord`] serialises them, borrowed: a snapshot is written without a
/// copy of the whole team in memory beside the team.
#[derive(Serialize)]
struct StatesRecordRef<'a> {
    tasks: Vec<&'a TaskState>,
    stages: Vec<&'a StageState>,
    agents: Vec<AgentRecordRef<'a>>,
    retired: Vec<&'a StepState>,
    summaries: Vec<&'a TaskSummaryLine>,
    steps_run: u64,
    in_flight: Vec<InFlight>,
    last_message_no: u64,
    step_times: Vec<(StepId, Times)>,
    stage_times: Vec<(StageId, Times)>,
    task_times: Vec<(TaskId, Times)>,
}

impl States {
    /// The JSON of [`StatesRecord::of`] these states, written straight from them.
    pub fn record_json(&self) -> serde_json::Result<String> {
        let mut out = Vec::new();
        self.write_record(&mut out)?;
        String::from_utf8(out).map_err(|e| serde::ser::Error::custom(e.to_string()))
    }

    /// [`States::record_json`] written to `w` as it is made (a store takes it in parts).
    pub fn write_record(&self, w: impl std::io::Write) -> serde_json::Result<()> {
        let times = self.times.record();
        serde_json::to_writer(
            w,
            &StatesRecordRef {
                tasks: self.tasks_in_order(),
                stages: self.stages.values().collect(),
                agents: self.agents.values().map(AgentRecordRef::of).collect(),
                retired: self.retired_in_order().collect(),
                summaries: self.summaries().collect(),
                steps_run: self.counters().steps_run,
                in_flight: self.deliveries.in_flight().collect(),
                last_message_no: self.deliveries.last_no(),
                step_times: times.steps,
                stage_times: times.stages,
                task_times: times.tasks,
            },
        )
    }
}

/// A reader's whole copy of the team at one version: what a store snapshot holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatesRecord {
    /// Tasks in the order they were created.
    pub tasks: Vec<TaskState>,
    /// The stages of the tasks in memory.
    pub stages: Vec<StageState>,
    /// Every agent, whole.
    pub agents: Vec<AgentRecord>,
    /// Steps that left their agent, oldest first (their tasks are in `tasks`).
    pub retired: Vec<StepState>,
    /// The summary lines of evicted tasks, oldest first.
    pub summaries: Vec<TaskSummaryLine>,
    /// Steps that ran to their end so far (the one counter that cannot be counted again
    /// from what is held).
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
    /// When the stages held started and ended.
    #[serde(default)]
    pub stage_times: Vec<(StageId, Times)>,
    /// When the tasks held started and ended.
    #[serde(default)]
    pub task_times: Vec<(TaskId, Times)>,
}

impl StatesRecord {
    /// The whole of `states`, copied (see [`States::write_record`] to write it without the
    /// copy).
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

    /// The record as a store keeps it.
    pub fn json(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }

    /// The states again, with their messages in flight and times, as the record was made
    /// from them (the counters of what is held are counted again).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentChange, Change, StepChange, TaskChange};
    use crate::ids::StageRef;
    use crate::message::Message;
    use crate::state::{ConversationEntry, Executor, PrivateMessage, Skill};

    /// A team with a task and its conversation, a person with a chat, an agent with a live
    /// step and a retired one, a message in flight and times.
    fn team() -> States {
        let mut s = States::default();
        let task = TaskState::new("t".into(), "n".into(), "i".into(), "a".into());
        s.apply_at(
            &Change::Task(TaskChange::Created {
                task: Box::new(task),
            }),
            1,
        );
        let m = Arc::new(Message::notice(
            "t".into(),
            "a".into(),
            vec!["p".into()],
            StageRef::NoRelative,
            "hello".into(),
        ));
        let entry = ConversationEntry {
            timestamp: "now".into(),
            message: m,
        };
        s.apply_at(
            &Change::Task(TaskChange::Conversation {
                task_id: "t".into(),
                entry,
                message_no: 1,
            }),
            2,
        );
        let mut person = AgentState::new("p".into(), "P".into(), "op".into(), "".into());
        person.conversation_pool = Some(ConversationPool::default());
        let agent = AgentState::new("a".into(), "A".into(), "w".into(), "".into());
        for a in [person, agent] {
            s.apply(&Change::Agent(AgentChange::Added { agent: Box::new(a) }));
        }
        s.apply(&Change::Agent(AgentChange::PrivateMessage {
            agent_id: "p".into(),
            with: "a".into(),
            entry: PrivateMessage {
                attachments: Vec::new(),
                task_id: "t".into(),
                sender_id: "a".into(),
                content: "hello".into(),
                stage_relative: StageRef::NoRelative,
                timestamp: "now".into(),
                need_reply: false,
                waiting: false,
                return_waiting_id: None,
                replied: false,
                ask: None,
                reply_by_ms: None,
            },
        }));
        for n in 0..2 {
            let step = StepState::new(
                "t".into(),
                StageRef::NoRelative,
                "a".into(),
                Executor::Skill(Skill::Think),
                format!("step {n}"),
                "text",
            );
            let id = step.step_id.clone();
            s.apply_at(
                &Change::Step(StepChange::Added {
                    agent_id: "a".into(),
                    step: Box::new(step),
                    list_at: 0,
                    todo_at: Some(0),
                    remember: true,
                }),
                3,
            );
            s.apply_at(
                &Change::Step(StepChange::Started {
                    agent_id: "a".into(),
                    step_id: id.clone(),
                }),
                4,
            );
            if n == 0 {
                s.apply(&Change::Step(StepChange::Removed {
                    agent_id: "a".into(),
                    step_ids: vec![id],
                }));
            }
        }
        s
    }

    #[test]
    fn a_snapshot_written_from_the_states_is_their_record() {
        let s = team();
        let record = StatesRecord::of(&s);
        assert!(!record.retired.is_empty() && !record.in_flight.is_empty());
        assert!(record.agents.iter().any(|a| a.conversation_pool.is_some()));
        assert_eq!(s.record_json().unwrap(), record.json().unwrap());
    }

    #[test]
    fn the_states_written_straight_are_what_their_json_tree_says() {
        let s = team();
        let mut out = Vec::new();
        s.write_all(&mut out).unwrap();
        let written: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(written, s.all_json());
        assert!(written["step"].as_object().unwrap().len() == 2);
    }
}
