//! The changes an agent makes to itself. Each operation decides one or more `Change`s from the
//! agent's state, applies them with `event::apply_agent` (the function every reader uses) and
//! keeps them in the agent's outbox, which its actor publishes after each message it handles.
//! Nothing else writes an agent's steps, queue, lock or memory.

use super::{
    Agent, AgentState, Held, MemoryOp, PrivateMessage, StepExecutionState, StepResult, StepState,
    TokenUsage, memory_key,
};
use crate::event::trace::TraceId;
use crate::event::{AgentChange, Change, StepChange, StepUpdate, apply_agent};
use crate::ids::{AgentId, StageId, StageRef, StepId, TaskId, WaitId};
use chrono::NaiveDateTime;

/// How many messages of one private conversation, and how many notices, a person's state keeps
/// (the oldest leave first; an unanswered question stays until the chat is twice this size).
pub const PRIVATE_KEPT: usize = 500;
/// How many bytes one private conversation keeps unless told (a 256 MiB budget's 128th).
pub const PRIVATE_BYTES_KEPT: usize = 2 << 20;

impl AgentState {
    /// Applies a change to this agent and keeps it for publishing; returns the steps it removed.
    pub fn emit(&mut self, c: Change) -> Vec<StepState> {
        let removed = apply_agent(self, &c);
        self.outbox.push(c);
        removed
    }

    /// Applies changes someone else stored for this agent (SyncState, with a step's output):
    /// the agent's state follows them, and they are not published again.
    pub fn apply_stored(&mut self, changes: Vec<Change>) {
        for c in &changes {
            apply_agent(self, c);
        }
    }

    /// Acknowledges routed message `no` (it leaves the messages in flight once stored).
    pub fn note_received(&mut self, no: u64) {
        if no > 0 {
            self.emit(Change::Agent(AgentChange::Received {
                agent_id: self.id(),
                message_no: no,
            }));
        }
    }

    /// The changes made since the last call, in order.
    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.outbox)
    }

    /// The change that introduces this agent to readers.
    pub fn added(&self) -> Change {
        let mut agent = self.clone();
        agent.outbox.clear();
        Change::Agent(AgentChange::Added {
            agent: Box::new(agent),
        })
    }

    fn id(&self) -> AgentId {
        self.agent_id.clone()
    }

    /// The step [`start_next`](Self::start_next) would start: the first queued one whose task
    /// is not paused and that waits for no step it depends on (`pending`).
    pub fn next_runnable(&self) -> Option<&StepState> {
        self.agent_step
            .todo()
            .filter_map(|id| self.agent_step.get(id))
            .find(|s| {
                !self.paused_tasks.contains(&s.task_id)
                    && s.execution_state != StepExecutionState::Pending
            })
    }

    /// Starts the first queued step whose task is not paused.
    pub fn start_next(&mut self) -> Option<StepState> {
        let id = self.next_runnable()?.step_id.clone();
        self.emit(Change::Step(StepChange::Started {
            agent_id: self.id(),
            step_id: id.clone(),
        }));
        self.agent_step.get(&id).cloned()
    }

    /// Removes one step (a running step whose stage was cleaned up while it ran).
    pub fn remove_step(&mut self, id: &StepId) {
        if self.agent_step.get(id).is_some() {
            self.emit(Change::Step(StepChange::Removed {
                agent_id: self.id(),
                step_ids: vec![id.clone()],
            }));
        }
    }

    /// Keeps at most `keep` finished or failed `no_relative` steps of a task in the step list
    /// and working memory, dropping the oldest. The base task never ends, so without this a
    /// long-lived manager's or person's list would only grow. The steps stay readable where
    /// they were published, and prompts show only the newest few anyway.
    pub fn trim_loose_history(&mut self, task: &TaskId, keep: usize) -> usize {
        let gone = self.agent_step.trim_plan(task, &StageRef::NoRelative, keep);
        let n = gone.len();
        if n > 0 {
            self.emit(Change::Step(StepChange::Removed {
                agent_id: self.id(),
                step_ids: gone,
            }));
        }
        n
    }

    /// `update_working_memory`: make sure the task (and stage) has an entry.
    pub fn note_working_memory(&mut self, task: TaskId, stage: Option<StageRef>) {
        self.emit(Change::Agent(AgentChange::WorkNoted {
            agent_id: self.id(),
            task_id: task,
            stage_id: stage,
        }));
    }

    /// Pauses or resumes the agent; false when it already was.
    pub fn set_paused(&mut self, paused: bool) -> bool {
        if self.paused == paused {
            return false;
        }
        self.emit(Change::Agent(AgentChange::Paused {
            agent_id: self.id(),
            paused,
            task_id: None,
        }));
        true
    }

    /// Pauses or resumes the agent's work for `task` (its steps stay queued, none starts);
    /// false when it already was.
    pub fn set_task_paused(&mut self, task: &TaskId, paused: bool) -> bool {
        if self.paused_tasks.contains(task) == paused {
            return false;
        }
        self.emit(Change::Agent(AgentChange::Paused {
            agent_id: self.id(),
            paused,
            task_id: Some(task.clone()),
        }));
        true
    }

    /// Frees one wait id when `sender` is the one it waits for; false when it was not held
    /// (a late or duplicate reply) or someone else sent it (a copied wait id frees nothing).
    pub fn release_wait(&mut self, id: &WaitId, sender: &AgentId) -> bool {
        if !self.step_lock.answered_by(id, sender) {
            return false;
        }
        self.release_waits(std::slice::from_ref(id));
        true
    }

    /// Releases those of `ids` its step lock holds, whoever they wait for.
    pub fn release_waits(&mut self, ids: &[WaitId]) {
        let ids: Vec<WaitId> = ids
            .iter()
            .filter(|w| self.step_lock.holds(w))
            .cloned()
            .collect();
        if !ids.is_empty() {
            self.emit(Change::Agent(AgentChange::WaitsReleased {
                agent_id: self.id(),
                ids,
            }));
        }
    }

    /// Applies `<persistent_memory>` instructions. `add` stores under the timestamp key of `now`
    /// (moved forward a second at a time if that key is taken); `delete` removes a key.
    /// Headings above level 3 are demoted, as the SPEC allows only `###` and below.
    pub fn apply_memory_ops(&mut self, ops: &[MemoryOp], now: NaiveDateTime) {
        let mut t = now;
        for op in ops {
            let c = match op {
                MemoryOp::Add(text) => {
                    while self.persistent_memory.contains_key(&memory_key(t)) {
                        t += chrono::Duration::seconds(1);
                    }
                    AgentChange::MemoryAdded {
                        agent_id: self.id(),
                        key: memory_key(t),
                        text: super::agent::demote_headings(text),
                    }
                }
                MemoryOp::Delete(key) if self.persistent_memory.contains_key(key.trim()) => {
                    AgentChange::MemoryDeleted {
                        agent_id: self.id(),
                        key: key.trim().to_owned(),
                    }
                }
                MemoryOp::Delete(_) => continue,
            };
            self.emit(Change::Agent(c));
        }
    }

    /// Adds tokens spent to the agent's total (nothing for an empty usage).
    pub fn add_tokens(&mut self, usage: TokenUsage) {
        if usage != TokenUsage::default() {
            self.emit(Change::Agent(AgentChange::Tokens {
                agent_id: self.id(),
                usage,
            }));
        }
    }

    /// The agent owes a summary in this stage.
    pub fn open_goal(&mut self, task: &TaskId, stage: &StageId) {
        if !self.open_goals.contains(&(task.clone(), stage.clone())) {
            self.emit(Change::Agent(AgentChange::GoalOpened {
                agent_id: self.id(),
                task_id: task.clone(),
                stage_id: stage.clone(),
            }));
        }
    }

    /// The agent no longer owes a summary in this stage.
    pub fn close_goal(&mut self, task: &TaskId, stage: &StageId) {
        if self.open_goals.contains(&(task.clone(), stage.clone())) {
            self.emit(Change::Agent(AgentChange::GoalClosed {
                agent_id: self.id(),
                task_id: task.clone(),
                stage_id: stage.clone(),
            }));
        }
    }

    /// Keeps `summary` as the summary of its task and stage's older history.
    pub fn keep_history_summary(&mut self, summary: crate::state::HistorySummary) {
        self.emit(Change::Agent(AgentChange::HistorySummarized {
            agent_id: self.id(),
            summary,
        }));
    }

    /// Brings `working_state` up to date with the queue and the lock.
    pub fn refresh_working_state(&mut self) {
        let now = self.derive_working_state();
        if now != self.working_state {
            self.emit(Change::Agent(AgentChange::WorkingState {
                agent_id: self.id(),
                state: now,
            }));
        }
    }

    /// A notice for a person (the oldest leave past [`PRIVATE_KEPT`]).
    pub fn add_notice(&mut self, text: String) {
        self.emit(Change::Agent(AgentChange::Notice {
            agent_id: self.id(),
            text,
        }));
        let len = self
            .conversation_pool
            .as_ref()
            .map_or(0, |p| p.global_messages.len());
        if len > PRIVATE_KEPT {
            self.emit(Change::Agent(AgentChange::PrivateTrimmed {
                agent_id: self.id(),
                with: None,
                count: len - PRIVATE_KEPT,
            }));
        }
    }

    /// Marks the message at `index` of the conversation with `with` as answered.
    pub fn mark_replied(&mut self, with: &AgentId, index: usize) {
        self.emit(Change::Agent(AgentChange::PrivateReplied {
            agent_id: self.id(),
            with: with.clone(),
            index,
        }));
    }
}

/// The changes that follow the agent's settings: its steps' texts are capped to
/// `step_chars`, its waits last its `waits:` patience, a person's chats keep `private_bytes`.
impl Agent {
    fn step_added(&mut self, mut step: StepState, list_at: usize, todo_at: Option<usize>) {
        let remember = todo_at.is_some();
        let max = self.settings.step_chars;
        super::cap_str(&mut step.step_intention, max);
        super::cap_str(&mut step.text_content, max);
        if let Some(v) = &mut step.instruction_content {
            super::cap_value(v, max);
        }
        if let Some(r) = &mut step.execute_result {
            r.cap(max);
        }
        let maker = step.origin.made_by().and_then(|by| self.agent_step.get(by));
        if step.trace_id.is_none() {
            step.trace_id = Some(trace_of_new_step(&step, maker));
        }
        // A step planned by one a message chose the model or servers for keeps the choice.
        if step.choice.is_none() {
            step.choice = maker.and_then(|m| m.choice.clone());
        }
        self.state.emit(Change::Step(StepChange::Added {
            agent_id: self.id(),
            step: Box::new(step),
            list_at,
            todo_at,
            remember,
        }));
    }

    /// Appends steps to the queue and records them in working memory.
    pub fn add_steps(&mut self, steps: Vec<StepState>) {
        for step in steps {
            let (list_at, todo_at) = self.agent_step.append_place();
            self.step_added(step, list_at, Some(todo_at));
        }
    }

    /// Inserts steps, in order, before the next pending one, and records them in working memory.
    pub fn add_next_steps(&mut self, steps: Vec<StepState>) {
        let at = self.agent_step.next_place();
        for (i, step) in steps.into_iter().enumerate() {
            self.step_added(step, at + i, Some(i));
        }
    }

    /// Records a step that is already over (what a person did, a call a tool loop made); it
    /// never enters the queue. It goes where it happened: before the steps still to run.
    pub fn add_done(&mut self, step: StepState) {
        let at = self.agent_step.next_place();
        self.step_added(step, at, None);
    }

    /// Records an update to one of its steps, its texts capped to `step_chars`; nothing if the
    /// agent does not hold the step.
    pub fn update_step(&mut self, id: &StepId, mut update: StepUpdate) {
        if self.agent_step.get(id).is_some() {
            if let Some(v) = &mut update.instruction_content {
                super::cap_value(v, self.settings.step_chars);
            }
            if let Some(r) = &mut update.execute_result {
                r.cap(self.settings.step_chars);
            }
            self.state.emit(Change::Step(StepChange::Updated {
                agent_id: self.id(),
                step_id: id.clone(),
                update,
            }));
        }
    }

    /// `finish_stage`: drops the stage's steps, its working memory and the waits taken in it.
    /// Returns the dropped steps that never ran, marked failed with `why`.
    pub fn finish_stage(&mut self, task: &TaskId, stage: &StageRef, why: &str) -> Vec<StepState> {
        self.state.emit(Change::Agent(AgentChange::WorkCleared {
            agent_id: self.id(),
            task_id: task.clone(),
            stage_id: Some(stage.clone()),
        }));
        if let Some(s) = stage.stage() {
            self.close_goal(task, s);
        }
        self.finish_work(task, Some(stage), why)
    }

    /// `finish_task`: drops every step, the working memory and the waits of the task.
    pub fn finish_task(&mut self, task: &TaskId, why: &str) -> Vec<StepState> {
        self.state.emit(Change::Agent(AgentChange::WorkCleared {
            agent_id: self.id(),
            task_id: task.clone(),
            stage_id: None,
        }));
        let goals: Vec<StageId> = self
            .open_goals
            .iter()
            .filter(|(t, _)| t == task)
            .map(|(_, s)| s.clone())
            .collect();
        for s in &goals {
            self.close_goal(task, s);
        }
        // A finished task is paused no more (the set stays as small as the open tasks).
        self.set_task_paused(task, false);
        self.finish_work(task, None, why)
    }

    fn finish_work(
        &mut self,
        task: &TaskId,
        stage: Option<&StageRef>,
        why: &str,
    ) -> Vec<StepState> {
        let waits = self.step_lock.ids_in(task, stage);
        self.release_waits(&waits);
        let plan = self.agent_step.drop_plan(task, stage);
        if !plan.cut.is_empty() {
            self.state.emit(Change::Step(StepChange::CutLoose {
                agent_id: self.id(),
                step_ids: plan.cut,
            }));
        }
        let mut never_ran = Vec::new();
        for id in &plan.dropped {
            if self
                .agent_step
                .get(id)
                .is_some_and(|s| !s.execution_state.is_over())
            {
                self.update_step(
                    id,
                    StepUpdate {
                        execution_state: Some(StepExecutionState::Failed),
                        execute_result: Some(Box::new(StepResult {
                            dropped: true,
                            ..StepResult::failed(format!("dropped before it ran: {why}"))
                        })),
                        ..Default::default()
                    },
                );
                never_ran.push(id.clone());
            }
        }
        if plan.dropped.is_empty() {
            return Vec::new();
        }
        let removed = self.state.emit(Change::Step(StepChange::Removed {
            agent_id: self.id(),
            step_ids: plan.dropped,
        }));
        removed
            .into_iter()
            .filter(|s| never_ran.contains(&s.step_id))
            .collect()
    }

    /// Takes wait ids for a message sent from `task`/`stage`: each waits for the reply of its
    /// receiver, until `now` plus `patience` (per question) or else the team's patience for
    /// that receiver (`waits:`).
    pub fn hold_waits(
        &mut self,
        waits: Vec<(WaitId, AgentId)>,
        task: &TaskId,
        stage: &StageRef,
        now_ms: i64,
        patience: Option<std::time::Duration>,
    ) {
        if waits.is_empty() {
            return;
        }
        let until = waits
            .iter()
            .map(|(_, r)| {
                let p = patience.unwrap_or_else(|| self.settings.wait_patience.for_receiver(r));
                now_ms.saturating_add(i64::try_from(p.as_millis()).unwrap_or(i64::MAX))
            })
            .collect();
        let (ids, from) = waits.into_iter().unzip();
        self.state.emit(Change::Agent(AgentChange::WaitsHeld {
            agent_id: self.id(),
            task_id: task.clone(),
            stage_id: stage.clone(),
            ids,
            from,
            until,
        }));
    }

    /// A message in a person's private conversation with `with` (the oldest leave past
    /// [`PRIVATE_KEPT`]).
    pub fn add_private(&mut self, with: &AgentId, entry: PrivateMessage) {
        self.state.emit(Change::Agent(AgentChange::PrivateMessage {
            agent_id: self.id(),
            with: with.clone(),
            entry,
        }));
        let Some(chat) = self
            .conversation_pool
            .as_ref()
            .and_then(|p| p.conversation_privates.get(with))
        else {
            return;
        };
        // The oldest leave first, but a question the person has not answered yet stays (its
        // sender may be waiting for the answer) until the chat is twice its size.
        let mut excess = chat.len().saturating_sub(PRIVATE_KEPT);
        let bytes: usize = chat.iter().map(Held::held_bytes).sum();
        if bytes > self.settings.private_bytes {
            // Down to seven eighths of its bytes, so that trimming is one change per many
            // messages; the newest message stays whatever its size.
            let target = self.settings.private_bytes - self.settings.private_bytes / 8;
            let mut left = bytes;
            let by_bytes = chat[..chat.len() - 1]
                .iter()
                .take_while(|m| {
                    let go = left > target;
                    left -= m.held_bytes();
                    go
                })
                .count();
            excess = excess.max(by_bytes);
        }
        let unanswered = |m: &PrivateMessage| m.need_reply && !m.replied;
        let count = if chat.len() > 2 * PRIVATE_KEPT || bytes > 2 * self.settings.private_bytes {
            excess
        } else {
            chat.iter()
                .take(excess)
                .take_while(|m| !unanswered(m))
                .count()
        };
        if count > 0 {
            self.state.emit(Change::Agent(AgentChange::PrivateTrimmed {
                agent_id: self.id(),
                with: Some(with.clone()),
                count,
            }));
        }
    }
}

/// The trace a step joins as it is added: the trace of the message that caused it, else of
/// the step that made it (`maker`), else a trace of its own (a person's goal roots one).
fn trace_of_new_step(step: &StepState, maker: Option<&StepState>) -> TraceId {
    if let Some(cause) = &step.caused_by {
        return cause.trace;
    }
    maker
        .and_then(|m| m.trace_id)
        .unwrap_or_else(|| TraceId::of("step", step.step_id.as_str()))
}
