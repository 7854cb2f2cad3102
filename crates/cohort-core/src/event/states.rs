//! `States`: a reader's copy of the whole team, built by applying changes with the owners' own
//! `apply` functions. Besides the four kinds of state it keeps what a reader needs and an owner
//! does not: the steps that left their agent (a finished stage's, trimmed history) until their
//! task leaves memory, the one-line summaries of evicted tasks, and exact counters.

use super::apply::{apply_agent, apply_sync};
use super::deliveries::Deliveries;
use super::tally::{Seen, Tally};
use super::times::{Clock, Times, with_times};
use super::{AgentChange, Change, StateKind, StepChange, TaskChange};
use crate::ids::{AgentId, StageId, StepId, TaskId};
use crate::state::{
    AgentState, ExecutionState, Held, StageState, StepExecutionState, StepState, TaskState,
    TokenUsage, WorkingState,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// What is left in memory of a finished task after it was evicted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskSummaryLine {
    /// The evicted task's id.
    pub task_id: TaskId,
    /// Its name.
    pub task_name: String,
    /// How it ended.
    pub execution_state: ExecutionState,
    /// The first line of the task summary (at most 200 characters).
    pub summary: String,
    /// How many stages it had.
    pub stages: usize,
    /// Tokens its steps spent, summed.
    pub token_usage: TokenUsage,
}

impl TaskSummaryLine {
    /// The line kept of `task` when it is evicted: its summary's first, as people read it.
    pub fn of(task: &TaskState, t: &crate::texts::Texts) -> Self {
        let summary: String = task
            .summary_text(t)
            .as_deref()
            .and_then(|s| s.lines().next())
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        TaskSummaryLine {
            task_id: task.task_id.clone(),
            task_name: task.task_name.clone(),
            execution_state: task.execution_state,
            summary,
            stages: task.stage_list.len(),
            token_usage: task.token_usage,
        }
    }
}

/// A state with its times, as clients read it ([`with_times`] without a JSON tree).
#[derive(Serialize)]
struct Timed<'a, T: Serialize> {
    #[serde(flatten)]
    state: &'a T,
    #[serde(flatten)]
    times: Times,
}

fn timed<T: Serialize>(state: &T, times: Option<Times>) -> Timed<'_, T> {
    Timed {
        state,
        times: times.unwrap_or_default(),
    }
}

/// `{id: state}` of one kind, serialised from the states (see [`States::write_all`]).
struct OfKind<'a>(&'a States, StateKind);

impl Serialize for OfKind<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let s = self.0;
        let mut map = ser.serialize_map(None)?;
        match self.1 {
            StateKind::Task => {
                for (k, v) in &s.tasks {
                    map.serialize_entry(k, &timed(v, s.times.task(k)))?;
                }
            }
            StateKind::Stage => {
                for (k, v) in &s.stages {
                    map.serialize_entry(k, &timed(v, s.times.stage(k)))?;
                }
            }
            StateKind::Agent => {
                for (k, v) in &s.agents {
                    map.serialize_entry(k, v)?;
                }
            }
            StateKind::Step => {
                for st in s.steps() {
                    map.serialize_entry(&st.step_id, &timed(st, s.times.step(&st.step_id)))?;
                }
            }
        }
        map.end()
    }
}

/// A task as a list of tasks shows it (see [`States::task_summary_json`]).
#[derive(Serialize)]
struct TaskListed<'a> {
    task_id: &'a TaskId,
    task_name: &'a str,
    task_intention: &'a str,
    task_manager: &'a AgentId,
    task_group: &'a [AgentId],
    stage_list: &'a [StageId],
    execution_state: ExecutionState,
    task_summary: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary_written: Option<&'a crate::report::TaskWritten>,
    token_usage: TokenUsage,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    paused: bool,
    shared_info_count: usize,
    conversation_count: usize,
    shared_info_omitted: u64,
    shared_conversation_omitted: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<crate::event::trace::TraceId>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    attachments: &'a [crate::attachment::Attachment],
}

/// How many steps that left their agent a reader keeps per task (the oldest leave first; the
/// base task never ends).
pub const RETIRED_STEPS_KEPT: usize = 2_000;
/// How many bytes of steps that left their agent a reader keeps unless told (a 256 MiB
/// memory budget's 32nd), over all tasks; the oldest leave first.
pub const RETIRED_BYTES_KEPT: usize = 8 << 20;
/// How many evicted tasks' summary lines a reader keeps.
pub const SUMMARIES_KEPT: usize = 10_000;

/// Exact figures kept while applying, so readers never count by scanning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Steps that ran to their end (finished or failed; not those dropped before they ran).
    pub steps_run: u64,
    /// Steps running now.
    pub steps_running: u64,
    /// Agents whose working state is `working`.
    pub agents_working: u64,
}

/// A reader's copy of the whole team (the monitor's, a client's, `cohort run`'s), kept by
/// applying every change in order; see the module docs for what it keeps beside the states.
#[derive(Debug, Default)]
pub struct States {
    /// The tasks in memory, by id.
    pub tasks: BTreeMap<TaskId, TaskState>,
    /// The stages of the tasks in memory, by id.
    pub stages: BTreeMap<StageId, StageState>,
    /// Every agent, with the steps in its list, by id.
    pub agents: BTreeMap<AgentId, AgentState>,
    /// Which agent holds each step still in an agent's list.
    live: HashMap<StepId, AgentId>,
    /// Steps that left their agent's list, and per task their ids, oldest first.
    retired: HashMap<StepId, StepState>,
    retired_by_task: HashMap<TaskId, VecDeque<StepId>>,
    /// Every retired step's id in the order it retired (ids of steps gone since are skipped
    /// when met), their bytes, and the most they may hold (the memory budget's share).
    retired_order: VecDeque<StepId>,
    retired_bytes: usize,
    retired_cap: Option<usize>,
    summaries: VecDeque<TaskSummaryLine>,
    counters: Counters,
    /// When each task was created, as a sequence number (for listing tasks in that order).
    created: HashMap<TaskId, u64>,
    next_created: u64,
    /// Messages routed but not yet taken by every receiver.
    pub deliveries: Deliveries,
    /// When the steps, stages and tasks held here started and ended.
    pub times: Clock,
    /// What the team did since this reader started counting ([`States::start_tally`]).
    tally: Tally,
}

impl States {
    /// Applies a change published at `at` (ms since the Unix epoch): the states, and the
    /// times of the step, stage or task it starts or ends.
    pub fn apply_at(&mut self, c: &Change, at: i64) {
        let seen = Seen::of(c, &self.agents);
        self.apply(c);
        self.times.note(c, at);
        if let Some(seen) = seen {
            let started = self.times.step(&seen.step_id).and_then(|t| t.started_at);
            self.tally.note(seen, started, at);
        }
        // Forget the times of what was let go, in one sweep once they are as many as what is
        // held: amortised constant per change, bounded by what is held.
        let held = self.live.len() + self.retired.len() + self.stages.len() + self.tasks.len();
        if self.times.len() > 2 * held + 1024 {
            let (live, retired, stages, tasks) =
                (&self.live, &self.retired, &self.stages, &self.tasks);
            self.times.retain(
                |id| live.contains_key(id) || retired.contains_key(id),
                |id| stages.contains_key(id),
                |id| tasks.contains_key(id),
            );
        }
    }

    /// Applies a change to the states and the reader's bookkeeping (retired steps, summary
    /// lines, counters, messages in flight), without noting times (see [`States::apply_at`]).
    pub fn apply(&mut self, c: &Change) {
        match c {
            Change::Task(TaskChange::Evicted { task_id, summary }) => {
                apply_sync(&mut self.tasks, &mut self.stages, c);
                for id in self.retired_by_task.remove(task_id).unwrap_or_default() {
                    self.forget_retired(&id);
                }
                self.created.remove(task_id);
                self.summaries.push_back(summary.clone());
                if self.summaries.len() > SUMMARIES_KEPT {
                    self.summaries.pop_front();
                }
            }
            Change::Task(TaskChange::Created { task }) => {
                self.next_created += 1;
                self.created.insert(task.task_id.clone(), self.next_created);
                apply_sync(&mut self.tasks, &mut self.stages, c);
            }
            Change::Task(TaskChange::Conversation {
                entry, message_no, ..
            }) => {
                if *message_no > 0 {
                    self.deliveries.sent(*message_no, &entry.message);
                }
                apply_sync(&mut self.tasks, &mut self.stages, c);
            }
            Change::Agent(AgentChange::Received {
                agent_id,
                message_no,
            }) => self.deliveries.received(*message_no, agent_id),
            Change::Task(_) | Change::Stage(_) => apply_sync(&mut self.tasks, &mut self.stages, c),
            Change::Agent(AgentChange::Added { agent }) => {
                for s in agent.agent_step.steps() {
                    self.live.insert(s.step_id.clone(), agent.agent_id.clone());
                }
                if agent.working_state == WorkingState::Working {
                    self.counters.agents_working += 1;
                }
                if let Some(old) = self
                    .agents
                    .insert(agent.agent_id.clone(), (**agent).clone())
                    && old.working_state == WorkingState::Working
                {
                    self.counters.agents_working = self.counters.agents_working.saturating_sub(1);
                }
            }
            Change::Agent(_) | Change::Step(_) => self.apply_to_agent(c),
        }
    }

    fn apply_to_agent(&mut self, c: &Change) {
        let Some(agent) = c.agent_id().and_then(|id| self.agents.get_mut(id)) else {
            return;
        };
        let counters = &mut self.counters;
        match c {
            Change::Agent(AgentChange::WorkingState { state, .. }) => {
                let was = agent.working_state == WorkingState::Working;
                let is = *state == WorkingState::Working;
                match (was, is) {
                    (false, true) => counters.agents_working += 1,
                    (true, false) => {
                        counters.agents_working = counters.agents_working.saturating_sub(1)
                    }
                    _ => {}
                }
            }
            Change::Step(StepChange::Added { step, .. }) => {
                self.live
                    .insert(step.step_id.clone(), agent.agent_id.clone());
            }
            Change::Step(StepChange::Started { .. }) => counters.steps_running += 1,
            Change::Step(StepChange::Updated {
                step_id, update, ..
            }) => {
                if let (Some(s), Some(new)) =
                    (agent.agent_step.get(step_id), update.execution_state)
                {
                    let dropped = update.execute_result.as_ref().is_some_and(|r| r.dropped);
                    if s.execution_state == StepExecutionState::Running && new != s.execution_state
                    {
                        counters.steps_running = counters.steps_running.saturating_sub(1);
                    }
                    // Approved after waiting: running again.
                    if s.execution_state.waits_for_a_person() && new == StepExecutionState::Running
                    {
                        counters.steps_running += 1;
                    }
                    if !s.execution_state.is_over() && new.is_over() && !dropped {
                        counters.steps_run += 1;
                    }
                }
            }
            _ => {}
        }
        let removed = apply_agent(agent, c);
        for gone in removed {
            if gone.execution_state == StepExecutionState::Running {
                self.counters.steps_running = self.counters.steps_running.saturating_sub(1);
            }
            self.live.remove(&gone.step_id);
            self.retire(gone);
        }
    }

    /// Holds the steps that left their agents to `bytes` (the memory budget's share for them;
    /// [`RETIRED_BYTES_KEPT`] unless said).
    pub fn hold_retired_to(&mut self, bytes: usize) {
        self.retired_cap = Some(bytes);
        self.keep_retired_within_cap();
    }

    fn retire(&mut self, step: StepState) {
        // A step of a task that already left memory (it ran on past its task's end) goes too.
        if !self.tasks.contains_key(&step.task_id) {
            return;
        }
        let ids = self
            .retired_by_task
            .entry(step.task_id.clone())
            .or_default();
        ids.push_back(step.step_id.clone());
        let over = (ids.len() > RETIRED_STEPS_KEPT)
            .then(|| ids.pop_front())
            .flatten();
        if let Some(old) = over {
            self.forget_retired(&old);
        }
        self.retired_bytes += step.held_bytes();
        self.retired_order.push_back(step.step_id.clone());
        self.retired.insert(step.step_id.clone(), step);
        self.keep_retired_within_cap();
    }

    /// The oldest retired steps leave while they hold more than their cap.
    fn keep_retired_within_cap(&mut self) {
        let cap = self.retired_cap.unwrap_or(RETIRED_BYTES_KEPT);
        while self.retired_bytes > cap {
            let Some(id) = self.retired_order.pop_front() else {
                break;
            };
            let Some(task) = self.retired.get(&id).map(|s| s.task_id.clone()) else {
                continue;
            };
            // The oldest retired step overall is the oldest of its task.
            if let Some(ids) = self.retired_by_task.get_mut(&task) {
                if ids.front() == Some(&id) {
                    ids.pop_front();
                } else {
                    ids.retain(|x| *x != id);
                }
            }
            self.forget_retired(&id);
        }
        // Ids of steps gone by other ways are dropped in one sweep once they are as many as
        // the steps held: amortised constant per step.
        if self.retired_order.len() > 2 * self.retired.len() + 1024 {
            let retired = &self.retired;
            self.retired_order.retain(|id| retired.contains_key(id));
        }
    }

    fn forget_retired(&mut self, id: &StepId) {
        if let Some(s) = self.retired.remove(id) {
            self.retired_bytes = self.retired_bytes.saturating_sub(s.held_bytes());
        }
    }

    /// The bytes held by steps that left their agents.
    pub fn retired_bytes(&self) -> usize {
        self.retired_bytes
    }

    /// The tasks in memory in the order they were created.
    pub fn tasks_in_order(&self) -> Vec<&TaskState> {
        let mut tasks: Vec<&TaskState> = self.tasks.values().collect();
        tasks.sort_by_key(|t| self.created.get(&t.task_id).copied().unwrap_or(0));
        tasks
    }

    /// What the team did since counting started.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Counts from now on only: what was applied to load the states (a restart replaying the
    /// store) is not counted again.
    pub fn start_tally(&mut self) {
        self.tally = Tally::default();
    }

    /// The exact figures kept while applying.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Steps that left their agent, task by task in creation order, oldest first.
    pub fn retired_in_order(&self) -> impl Iterator<Item = &StepState> {
        self.tasks_in_order().into_iter().flat_map(|t| {
            self.retired_by_task
                .get(&t.task_id)
                .into_iter()
                .flatten()
                .filter_map(|id| self.retired.get(id))
        })
    }

    /// States rebuilt from a store's record of them (tasks in creation order, retired steps
    /// oldest first); the counters of what is there now are counted again.
    pub fn restore(
        tasks: Vec<TaskState>,
        stages: Vec<StageState>,
        agents: impl IntoIterator<Item = AgentState>,
        retired: Vec<StepState>,
        summaries: Vec<TaskSummaryLine>,
        counters: Counters,
    ) -> States {
        let mut s = States {
            counters: Counters {
                steps_run: counters.steps_run,
                ..Counters::default()
            },
            summaries: summaries.into(),
            ..States::default()
        };
        for t in tasks {
            s.next_created += 1;
            s.created.insert(t.task_id.clone(), s.next_created);
            s.tasks.insert(t.task_id.clone(), t);
        }
        s.stages = stages
            .into_iter()
            .map(|st| (st.stage_id.clone(), st))
            .collect();
        for a in agents {
            for step in a.agent_step.steps() {
                s.live.insert(step.step_id.clone(), a.agent_id.clone());
                if step.execution_state == StepExecutionState::Running {
                    s.counters.steps_running += 1;
                }
            }
            if a.working_state == WorkingState::Working {
                s.counters.agents_working += 1;
            }
            s.agents.insert(a.agent_id.clone(), a);
        }
        // Kept whole here: the team's own cap applies once it is set (`hold_retired_to`).
        s.retired_cap = Some(usize::MAX);
        for step in retired {
            s.retire(step);
        }
        s.retired_cap = None;
        s
    }

    /// Evicted tasks' summary lines, oldest first.
    pub fn summaries(&self) -> impl Iterator<Item = &TaskSummaryLine> {
        self.summaries.iter()
    }

    /// The step of this id, in its agent's list or among those that left it.
    pub fn step(&self, id: &StepId) -> Option<&StepState> {
        match self.live.get(id) {
            Some(agent) => self.agents.get(agent)?.agent_step.get(id),
            None => self.retired.get(id),
        }
    }

    /// Every step readers can see: those in agents' lists, then those that left them.
    pub fn steps(&self) -> impl Iterator<Item = &StepState> {
        self.agents
            .values()
            .flat_map(|a| a.agent_step.steps())
            .chain(self.retired.values())
    }

    /// One state as clients read it.
    pub fn json(&self, kind: StateKind, id: &str) -> Option<Value> {
        let v = match kind {
            StateKind::Task => {
                let id = TaskId::from(id);
                with_times(self.tasks.get(&id)?, self.times.task(&id))
            }
            StateKind::Stage => {
                let id = StageId::from(id);
                with_times(self.stages.get(&id)?, self.times.stage(&id))
            }
            StateKind::Agent => serde_json::to_value(self.agents.get(&AgentId::from(id))?),
            StateKind::Step => {
                let id = StepId::from(id);
                with_times(self.step(&id)?, self.times.step(&id))
            }
        };
        v.ok()
    }

    /// A task as a list shows it: everything but its pools, which are counted instead
    /// (`shared_info_count`, `conversation_count`): a pool may hold megabytes, and a list
    /// of tasks is read often. `/api/state/{id}` gives the whole task.
    pub fn task_summary_json(&self, id: &TaskId, counts: Option<(usize, usize)>) -> Option<Value> {
        let t = self.tasks.get(id)?;
        let (shared_info_count, conversation_count) =
            counts.unwrap_or((t.shared_info_pool.len(), t.shared_conversation_pool.len()));
        let summary = TaskListed {
            task_id: &t.task_id,
            task_name: &t.task_name,
            task_intention: &t.task_intention,
            task_manager: &t.task_manager,
            task_group: &t.task_group,
            stage_list: &t.stage_list,
            execution_state: t.execution_state,
            task_summary: t.task_summary.as_deref(),
            summary_written: t.summary_written.as_deref(),
            token_usage: t.token_usage,
            paused: t.paused,
            shared_info_count,
            conversation_count,
            shared_info_omitted: t.shared_info_omitted,
            shared_conversation_omitted: t.shared_conversation_omitted,
            trace_id: t.trace_id,
            attachments: &t.attachments,
        };
        with_times(&summary, self.times.task(id)).ok()
    }

    /// The ids of one kind in list order, optionally only those of one task: steps by when
    /// they were created (then by id), the other kinds by id.
    pub fn ids(&self, kind: StateKind, task: Option<&TaskId>) -> Vec<String> {
        let mut ids: Vec<String> = match kind {
            StateKind::Task => self
                .tasks
                .keys()
                .filter(|t| task.is_none_or(|x| *t == x))
                .map(|t| t.to_string())
                .collect(),
            StateKind::Stage => self
                .stages
                .values()
                .filter(|s| task.is_none_or(|x| &s.task_id == x))
                .map(|s| s.stage_id.to_string())
                .collect(),
            StateKind::Agent => {
                let group = task.and_then(|t| self.tasks.get(t)).map(|t| &t.task_group);
                self.agents
                    .keys()
                    .filter(|a| task.is_none() || group.is_some_and(|g| g.contains(a)))
                    .map(|a| a.to_string())
                    .collect()
            }
            StateKind::Step => {
                let mut steps: Vec<(i64, String)> = self
                    .steps()
                    .filter(|s| task.is_none_or(|x| &s.task_id == x))
                    .map(|s| (self.step_created(s.step_id.as_str()), s.step_id.to_string()))
                    .collect();
                steps.sort_unstable();
                return steps.into_iter().map(|(_, id)| id).collect();
            }
        };
        ids.sort_unstable();
        ids
    }

    /// When step `id` was created, as lists order steps (0 for a step known without a time).
    fn step_created(&self, id: &str) -> i64 {
        self.times.step_created(&id.into()).unwrap_or(0)
    }

    /// Where a page that follows `after` starts in `ids` (a list [`States::ids`] gave): just
    /// past `after` in the list's order. A step `after` the states no longer hold starts the
    /// list again (a reader that keeps what it read by id loses nothing).
    pub fn page_start(&self, kind: StateKind, ids: &[String], after: &str) -> usize {
        if kind != StateKind::Step {
            return ids.partition_point(|id| id.as_str() <= after);
        }
        if self.step(&after.into()).is_none() {
            return 0;
        }
        let key = (self.step_created(after), after);
        ids.partition_point(|id| (self.step_created(id), id.as_str()) <= key)
    }

    /// `{id: state}` for one kind.
    pub fn kind_json(&self, kind: StateKind) -> Map<String, Value> {
        let mut out = Map::new();
        let mut put = |id: String, v: Result<Value, serde_json::Error>| {
            if let Ok(v) = v {
                out.insert(id, v);
            }
        };
        match kind {
            StateKind::Task => self
                .tasks
                .iter()
                .for_each(|(k, v)| put(k.to_string(), with_times(v, self.times.task(k)))),
            StateKind::Stage => self
                .stages
                .iter()
                .for_each(|(k, v)| put(k.to_string(), with_times(v, self.times.stage(k)))),
            StateKind::Agent => self
                .agents
                .iter()
                .for_each(|(k, v)| put(k.to_string(), serde_json::to_value(v))),
            StateKind::Step => self.steps().for_each(|s| {
                put(
                    s.step_id.to_string(),
                    with_times(s, self.times.step(&s.step_id)),
                )
            }),
        }
        out
    }

    /// [`States::all_json`] written straight to `out`, without a JSON tree of the whole team
    /// beside it (a snapshot of a large team is tens of megabytes; its tree, several times
    /// that).
    pub fn write_all(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        use serde::ser::{SerializeMap, Serializer};
        let mut ser = serde_json::Serializer::new(out);
        let mut all = ser.serialize_map(Some(StateKind::ALL.len()))?;
        for k in StateKind::ALL {
            all.serialize_entry(k.name(), &OfKind(self, k))?;
        }
        all.end()
    }

    /// `{"task": {…}, "stage": {…}, "agent": {…}, "step": {…}}`.
    pub fn all_json(&self) -> Value {
        let mut out = Map::new();
        for k in StateKind::ALL {
            out.insert(k.name().to_owned(), Value::Object(self.kind_json(k)));
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::AgentChange;
    use crate::ids::StageRef;
    use crate::state::{Executor, Skill};

    #[test]
    fn steps_that_left_their_agents_are_held_to_their_bytes_oldest_leaving_first() {
        let mut s = States::default();
        s.hold_retired_to(200 << 10);
        let task = TaskState::new("t".into(), "n".into(), "i".into(), "a".into());
        s.apply(&Change::Task(TaskChange::Created {
            task: Box::new(task),
        }));
        let agent = AgentState::new("a".into(), "A".into(), "w".into(), "".into());
        s.apply(&Change::Agent(AgentChange::Added {
            agent: Box::new(agent),
        }));
        for i in 0..100 {
            let step = StepState::new(
                "t".into(),
                StageRef::NoRelative,
                "a".into(),
                Executor::Skill(Skill::Think),
                format!("{i:03}"),
                "x".repeat(10_000),
            );
            let id = step.step_id.clone();
            s.apply(&Change::Step(StepChange::Added {
                agent_id: "a".into(),
                step: Box::new(step),
                list_at: 0,
                todo_at: None,
                remember: false,
            }));
            s.apply(&Change::Step(StepChange::Removed {
                agent_id: "a".into(),
                step_ids: vec![id],
            }));
        }
        assert!(s.retired_bytes() <= 200 << 10, "{}", s.retired_bytes());
        let kept: Vec<&str> = s
            .retired_in_order()
            .map(|st| st.step_intention.as_str())
            .collect();
        assert!(kept.len() >= 15, "{}", kept.len());
        assert_eq!(kept.last(), Some(&"099"), "the newest stay");
        let counted: usize = s.retired_in_order().map(Held::held_bytes).sum();
        assert_eq!(
            counted,
            s.retired_bytes(),
            "the running sum is what is held"
        );
    }

    #[test]
    fn steps_are_listed_by_when_they_were_created_and_paged_in_that_order() {
        let mut s = States::default();
        let agent = AgentState::new("a".into(), "A".into(), "w".into(), "".into());
        s.apply(&Change::Agent(AgentChange::Added {
            agent: Box::new(agent),
        }));
        // Ids sort the other way round from the times the steps were added at.
        for (id, at) in [("c", 100), ("b", 200), ("a", 300), ("d", 300)] {
            let mut step = StepState::new(
                "t".into(),
                StageRef::NoRelative,
                "a".into(),
                Executor::Skill(Skill::Think),
                id,
                "",
            );
            step.step_id = id.into();
            let added = Change::Step(StepChange::Added {
                agent_id: "a".into(),
                step: Box::new(step),
                list_at: 9,
                todo_at: None,
                remember: false,
            });
            s.apply_at(&added, at);
        }
        let ids = s.ids(StateKind::Step, None);
        assert_eq!(ids, ["c", "b", "a", "d"], "by time, then by id");
        assert_eq!(s.page_start(StateKind::Step, &ids, "c"), 1);
        assert_eq!(s.page_start(StateKind::Step, &ids, "a"), 3);
        assert_eq!(s.page_start(StateKind::Step, &ids, "d"), 4);
        assert_eq!(s.page_start(StateKind::Step, &ids, "gone"), 0);
        let json = s.json(StateKind::Step, "b").unwrap();
        assert_eq!(json["created_at"], 200, "{json}");
    }

    #[test]
    fn the_tally_counts_ended_steps_their_time_tokens_and_repairs_once_each() {
        use super::super::StepUpdate;
        use super::super::tally::Outcome;
        use crate::policy::repairs::{Fired, Repair};
        use crate::state::{StepResult, TokenUsage};
        let mut s = States::default();
        let mut agent = AgentState::new("a".into(), "A".into(), "w".into(), "".into());
        agent.llm_config = Some(crate::state::LlmSettings {
            provider: "openai".into(),
            model: "m1".into(),
            base_url: None,
        });
        s.apply(&Change::Agent(AgentChange::Added {
            agent: Box::new(agent),
        }));
        let step = StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "a".into(),
            Executor::Skill(Skill::Think),
            "i",
            "",
        );
        let id = step.step_id.clone();
        s.apply_at(
            &Change::Step(StepChange::Added {
                agent_id: "a".into(),
                step: Box::new(step),
                list_at: 0,
                todo_at: Some(0),
                remember: false,
            }),
            1_000,
        );
        let start = Change::Step(StepChange::Started {
            agent_id: "a".into(),
            step_id: id.clone(),
        });
        s.apply_at(&start, 2_000);
        let update = |u: StepUpdate| {
            Change::Step(StepChange::Updated {
                agent_id: "a".into(),
                step_id: id.clone(),
                update: u,
            })
        };
        // Running totals: the second reading adds only what was spent since the first.
        for (p, c) in [(100, 10), (250, 30)] {
            let spent = update(StepUpdate {
                token_usage: Some(TokenUsage::new(p, c)),
                ..Default::default()
            });
            s.apply_at(&spent, 2_500);
        }
        let mut result = StepResult::default();
        result
            .repairs
            .push(Fired::new(Repair::LoopCut, "cut the loop"));
        let end = update(StepUpdate {
            execution_state: Some(StepExecutionState::Finished),
            execute_result: Some(Box::new(result)),
            ..Default::default()
        });
        s.apply_at(&end, 4_500);
        // Said again (a replayed update): the step is over already, nothing more is counted.
        s.apply_at(&end, 5_000);

        let t = s.tally();
        assert_eq!(t.steps.get(&("think".into(), Outcome::Finished)), Some(&1));
        assert_eq!(t.steps.len(), 1);
        let h = &t.step_seconds["think"];
        assert_eq!((h.count, h.sum), (1, 2.5));
        let used = t.usage[&("a".into(), "openai/m1".into())];
        assert_eq!((used.prompt_tokens, used.completion_tokens), (250, 30));
        assert_eq!(t.repairs.get(&Repair::LoopCut.name()), Some(&1));
        s.start_tally();
        assert!(s.tally().steps.is_empty());
    }
}
