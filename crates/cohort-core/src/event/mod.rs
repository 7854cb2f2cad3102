//! State as a stream of small events: every change to a task, stage, agent or step is one
//! typed `Change` carrying only what changed. Owners (SyncState for tasks and stages, each
//! agent actor for itself and its steps) decide a change, apply it to their own state with the
//! pure functions in [`apply`], and hand it on; every reader (the monitor, the websocket,
//! `cohort run`, tests) folds the same changes with the same functions. A `Change` states an
//! outcome (insert this step at this place, remove these ids), never a command whose result a
//! reader would have to work out again, so applying it is simple and exact.
//!
//! - [`apply`]: the pure `apply` of a change to a task, a stage or an agent (with its steps).
//! - [`record`]: the whole of a state as the store keeps it (the wire form leaves parts out).
//! - [`flow`]: the seeds' event stream of one task (FLOW_*/STEP_*/TEXT_ADD) folded from changes.
//! - [`trace`]: the spans of the team's work (one goal, one trace), planned from the states.
//! - [`states`]: `States`, a reader's copy of the whole team built from changes, with the
//!   bookkeeping a reader needs (steps that left their agent, evicted tasks, counters).

pub mod apply;
pub mod deliveries;
pub mod flow;
pub mod record;
pub mod stall;
pub mod states;
pub mod tally;
pub mod times;
pub mod trace;
pub mod trace_context;

use crate::ids::{AgentId, StageId, StageRef, StepId, TaskId, WaitId};
use crate::report::Written;
use crate::state::{
    AgentState, ConversationEntry, ExecutionState, PrivateMessage, SharedInfo, StageAgentState,
    StageState, StepExecutionState, StepState, TaskState, TokenUsage, WorkingState,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use apply::{apply_agent, apply_stage, apply_task};
pub use record::{AgentRecord, StatesRecord};
pub use states::{States, TaskSummaryLine};

/// One change to the team's state. On the wire: `{"kind": "task"|"stage"|"agent"|"step",
/// "op": …, …fields}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A change to a task, decided by SyncState.
    Task(TaskChange),
    /// A change to a stage, decided by SyncState.
    Stage(StageChange),
    /// A change to an agent, decided by that agent.
    Agent(AgentChange),
    /// A change to one of an agent's steps, decided by that agent.
    Step(StepChange),
}

/// A change to one task; SyncState is the only one that makes them. On the wire `op` names
/// the variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TaskChange {
    /// A new task, whole as it starts.
    Created {
        /// The new task.
        task: Box<TaskState>,
    },
    /// Agents joined the task group (those already in it are skipped).
    Joined {
        /// The task joined.
        task_id: TaskId,
        /// The agents that joined, in the order they join the group.
        agents: Vec<AgentId>,
    },
    /// The task moved in its lifecycle.
    State {
        /// The task that moved.
        task_id: TaskId,
        /// Where the task is now.
        execution_state: ExecutionState,
        /// The manager's summary of what the task gave, when it is finished with one; `None`
        /// keeps the summary the task has.
        #[serde(skip_serializing_if = "Option::is_none")]
        task_summary: Option<String>,
        /// What the runtime wrote of that summary beside the manager's words, set with it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary_written: Option<Box<crate::report::TaskWritten>>,
        /// Why it ended as it did, when there is more to say than its state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Box<crate::state::TaskEnd>>,
    },
    /// An agent shared what it did: one line more in the task's shared info pool.
    SharedInfo {
        /// The task whose pool grows.
        task_id: TaskId,
        /// The line shared.
        entry: SharedInfo,
    },
    /// A message was routed: it joins the task's conversation pool and is in flight until
    /// each receiver took it ([`deliveries`]). Numbered by SyncState (0: not tracked).
    Conversation {
        /// The task the message was sent in.
        task_id: TaskId,
        /// The message, with when it was delivered.
        entry: ConversationEntry,
        /// The number SyncState gave the message, which its receivers acknowledge
        /// (`AgentChange::Received`); 0 for a message not tracked in flight.
        #[serde(default, skip_serializing_if = "is_zero")]
        message_no: u64,
    },
    /// The oldest entries of the shared pools left memory (a long-lived task's pools are
    /// capped); the task counts what it no longer holds.
    Trimmed {
        /// The task whose pools were trimmed.
        task_id: TaskId,
        /// How many of the oldest shared-info lines left.
        shared_info: usize,
        /// How many of the oldest conversation entries left.
        conversation: usize,
    },
    /// Tokens one of the task's steps spent, added to the task's total.
    Tokens {
        /// The task the tokens were spent for.
        task_id: TaskId,
        /// The tokens (and cost) to add.
        usage: TokenUsage,
    },
    /// Repair rules fired on one of the task's steps (`policy::repairs`).
    Repaired {
        /// The task whose step was repaired.
        task_id: TaskId,
        /// The rules that fired, each counted once more on the task.
        rules: Vec<crate::policy::Repair>,
    },
    /// An operator paused (or resumed) the task: its agents start none of its steps.
    Paused {
        /// The task paused or resumed.
        task_id: TaskId,
        /// True when paused, false when resumed.
        paused: bool,
    },
    /// The task was forked from a recorded one (`cohort replay --fork-at`).
    Forked {
        /// The fork.
        task_id: TaskId,
        /// The task and step it branched off from.
        from: crate::state::ForkedFrom,
    },
    /// A finished task left memory (retention); readers keep only the one-line summary.
    Evicted {
        /// The task that left memory, with its stages.
        task_id: TaskId,
        /// What readers keep of it.
        summary: TaskSummaryLine,
    },
}

/// A change to one stage; SyncState is the only one that makes them. On the wire `op` names
/// the variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StageChange {
    /// A new stage, placed at `list_at` in its task's stage list (not `at`: an event's `at`
    /// is its time).
    Added {
        /// The new stage, whole as it starts (it names its task).
        stage: StageState,
        /// Its place in the task's stage list (past the end: appended).
        list_at: usize,
    },
    /// The stage moved in its lifecycle.
    State {
        /// The stage that moved.
        stage_id: StageId,
        /// Where the stage is now.
        execution_state: ExecutionState,
    },
    /// An allocated agent's progress in the stage changed.
    Agent {
        /// The stage.
        stage_id: StageId,
        /// The allocated agent.
        agent_id: AgentId,
        /// The agent's progress in the stage now.
        state: StageAgentState,
    },
    /// An allocated agent's completion summary (it is finished in the stage from then on).
    Completion {
        /// The stage completed in.
        stage_id: StageId,
        /// The agent that submitted the summary.
        agent_id: AgentId,
        /// What the agent achieved in the stage, in its own words.
        summary: String,
        /// What its work steps produced (see `CompletionUpdate::results`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        results: Vec<String>,
        /// What the runtime added to the summary (see `CompletionUpdate::written`).
        #[serde(default, skip_serializing_if = "Written::is_own")]
        written: Written,
    },
}

/// A change to one agent; the agent itself makes them (a person's through their agent). On
/// the wire `op` names the variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AgentChange {
    /// An agent joined the team, whole with its steps (an agent of the same id is replaced).
    Added {
        /// The agent as it is now.
        agent: Box<AgentState>,
    },
    /// The agent became idle, working or waiting.
    WorkingState {
        /// The agent.
        agent_id: AgentId,
        /// What it is doing now.
        state: WorkingState,
    },
    /// The task (and stage) has an entry in working memory.
    WorkNoted {
        /// The agent whose working memory it is.
        agent_id: AgentId,
        /// The task noted.
        task_id: TaskId,
        /// The stage noted under the task; `None` notes only the task.
        #[serde(skip_serializing_if = "Option::is_none")]
        stage_id: Option<StageRef>,
    },
    /// The stage's entry (or with no stage, the task's) left working memory.
    WorkCleared {
        /// The agent whose working memory it is.
        agent_id: AgentId,
        /// The task cleared (or whose stage is cleared).
        task_id: TaskId,
        /// The stage cleared; `None` clears the whole task. Its history summaries go too.
        #[serde(skip_serializing_if = "Option::is_none")]
        stage_id: Option<StageRef>,
    },
    /// Waits taken: `ids[i]` waits for the reply of `from[i]` until `until[i]` (ms since the
    /// Unix epoch). `from` and `until` are empty in events stored before waits had them.
    WaitsHeld {
        /// The agent that waits (its step lock holds the waits).
        agent_id: AgentId,
        /// The task the waits were taken in; finishing it frees them.
        task_id: TaskId,
        /// The stage the waits were taken in; finishing it frees them.
        stage_id: StageRef,
        /// The wait ids, one per reply awaited.
        ids: Vec<WaitId>,
        /// Whose reply releases each wait.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        from: Vec<AgentId>,
        /// When each wait gives up (ms since the Unix epoch).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        until: Vec<i64>,
    },
    /// Waits left the step lock: their replies came, or their work ended.
    WaitsReleased {
        /// The agent that waited.
        agent_id: AgentId,
        /// The wait ids released.
        ids: Vec<WaitId>,
    },
    /// An entry was written to the agent's persistent memory.
    MemoryAdded {
        /// The agent whose memory it is.
        agent_id: AgentId,
        /// The entry's timestamp key (`%Y%m%dT%H%M%S`).
        key: String,
        /// The entry's markdown.
        text: String,
    },
    /// An entry left the agent's persistent memory.
    MemoryDeleted {
        /// The agent whose memory it is.
        agent_id: AgentId,
        /// The key of the entry removed.
        key: String,
    },
    /// Tokens the agent's steps spent, added to the agent's total.
    Tokens {
        /// The agent that spent them.
        agent_id: AgentId,
        /// The tokens (and cost) to add.
        usage: TokenUsage,
    },
    /// An operator paused (or resumed) the agent, or only its work for one task.
    Paused {
        /// The agent paused or resumed.
        agent_id: AgentId,
        /// True when paused, false when resumed.
        paused: bool,
        /// The one task whose work is paused or resumed; `None`: the whole agent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<TaskId>,
    },
    /// The agent owes a summary in this stage (bookkeeping for its closing reflection).
    GoalOpened {
        /// The agent that owes it.
        agent_id: AgentId,
        /// The stage's task.
        task_id: TaskId,
        /// The stage.
        stage_id: StageId,
    },
    /// The agent no longer owes a summary in this stage (it finished there, or the stage or
    /// task ended).
    GoalClosed {
        /// The agent that owed it.
        agent_id: AgentId,
        /// The stage's task.
        task_id: TaskId,
        /// The stage.
        stage_id: StageId,
    },
    /// The agent summarized the older history of a task and stage (replacing its summary).
    HistorySummarized {
        /// The agent that wrote the summary.
        agent_id: AgentId,
        /// The summary, naming its task and stage.
        summary: crate::state::HistorySummary,
    },
    /// A human's private conversation with `with` got a message (private to the human).
    PrivateMessage {
        /// The human.
        agent_id: AgentId,
        /// The other agent of the conversation.
        with: AgentId,
        /// The message, sent by either of them.
        entry: PrivateMessage,
    },
    /// The human answered the message at `index` of its conversation with `with`.
    PrivateReplied {
        /// The human.
        agent_id: AgentId,
        /// The other agent of the conversation.
        with: AgentId,
        /// The answered message's place in the conversation as the human holds it now.
        index: usize,
    },
    /// A notice for the human (private to the human).
    Notice {
        /// The human.
        agent_id: AgentId,
        /// The notice (e.g. that an agent waits for their reply).
        text: String,
    },
    /// The agent took routed message `message_no` (stored with what it did with it).
    Received {
        /// The receiver.
        agent_id: AgentId,
        /// The number SyncState gave the message (`TaskChange::Conversation`).
        message_no: u64,
    },
    /// The oldest `count` entries of a conversation (or of the notices, with no `with`) left
    /// memory: a person's pools are capped like every other list.
    PrivateTrimmed {
        /// The human.
        agent_id: AgentId,
        /// The other agent of the trimmed conversation; `None`: the notices.
        #[serde(skip_serializing_if = "Option::is_none")]
        with: Option<AgentId>,
        /// How many of the oldest entries left.
        count: usize,
    },
}

/// What an update sets on a step; fields left `None` keep their value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepUpdate {
    /// Where the step is now in its lifecycle; a queued step that is over leaves the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_state: Option<StepExecutionState>,
    /// The step's whole `execute_result`, replacing the one it had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execute_result: Option<Box<crate::state::StepResult>>,
    /// The tool call to make (a tool step's, as instruction_generation filled it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction_content: Option<Value>,
    /// The tokens the step's model calls spent so far, replacing its count (not added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<TokenUsage>,
    /// The step's wait for its model's endpoint began (`{since, reason}`) or ended (`null`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub model_wait: Option<Option<crate::state::ModelWait>>,
}

/// A field that may be absent (no change), `null` (cleared) or a value (set).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A change to one agent's steps; the agent itself makes them. On the wire `op` names the
/// variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StepChange {
    /// A new step at `list_at` in the agent's step list and, when it is to run, at `todo_at`
    /// in its queue; `remember` records it in working memory under its task and stage.
    Added {
        /// The agent that will run the step.
        agent_id: AgentId,
        /// The new step, whole.
        step: Box<StepState>,
        /// Its place in the agent's step list.
        list_at: usize,
        /// Its place in the queue of steps to run; `None`: not queued.
        #[serde(skip_serializing_if = "Option::is_none")]
        todo_at: Option<usize>,
        /// Whether the step is noted in working memory under its task and stage.
        remember: bool,
    },
    /// The step left the queue and runs.
    Started {
        /// The agent running it.
        agent_id: AgentId,
        /// The step started.
        step_id: StepId,
    },
    /// Some of the step's fields were set (its state, result, tool call, tokens, model wait).
    Updated {
        /// The agent holding the step.
        agent_id: AgentId,
        /// The step updated.
        step_id: StepId,
        /// What is set; on the wire its fields sit beside `agent_id` and `step_id`.
        #[serde(flatten)]
        update: StepUpdate,
    },
    /// The steps left the agent's list, queue and working memory (their work was finished,
    /// or they are old history); they keep the record they had.
    Removed {
        /// The agent that held the steps.
        agent_id: AgentId,
        /// The steps removed.
        step_ids: Vec<StepId>,
    },
    /// Running steps whose work was finished under them: they end, but belong to it no more.
    CutLoose {
        /// The agent running the steps.
        agent_id: AgentId,
        /// The running steps cut loose (so re-opened work does not adopt them).
        step_ids: Vec<StepId>,
    },
}

/// The four kinds of state a change belongs to (and that clients read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateKind {
    /// Tasks (`TaskState`).
    Task,
    /// Stages (`StageState`).
    Stage,
    /// Agents (`AgentState`).
    Agent,
    /// Steps (`StepState`).
    Step,
}

impl StateKind {
    /// Every kind, in the order clients list them (task, stage, agent, step).
    pub const ALL: [StateKind; 4] = [
        StateKind::Task,
        StateKind::Stage,
        StateKind::Agent,
        StateKind::Step,
    ];

    /// The kind's wire name: `task`, `stage`, `agent` or `step`.
    pub fn name(self) -> &'static str {
        match self {
            StateKind::Task => "task",
            StateKind::Stage => "stage",
            StateKind::Agent => "agent",
            StateKind::Step => "step",
        }
    }

    /// The kind a wire name names (as the REST API's `type=` gives it); `None` for any other.
    pub fn parse(name: &str) -> Option<StateKind> {
        StateKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl Change {
    /// The task a task change belongs to.
    pub fn task_id(&self) -> Option<&TaskId> {
        match self {
            Change::Task(t) => Some(match t {
                TaskChange::Created { task } => &task.task_id,
                TaskChange::Joined { task_id, .. }
                | TaskChange::State { task_id, .. }
                | TaskChange::SharedInfo { task_id, .. }
                | TaskChange::Conversation { task_id, .. }
                | TaskChange::Trimmed { task_id, .. }
                | TaskChange::Tokens { task_id, .. }
                | TaskChange::Repaired { task_id, .. }
                | TaskChange::Paused { task_id, .. }
                | TaskChange::Forked { task_id, .. }
                | TaskChange::Evicted { task_id, .. } => task_id,
            }),
            Change::Stage(StageChange::Added { stage, .. }) => Some(&stage.task_id),
            _ => None,
        }
    }

    /// The agent an agent or step change belongs to.
    pub fn agent_id(&self) -> Option<&AgentId> {
        match self {
            Change::Agent(a) => Some(match a {
                AgentChange::Added { agent } => &agent.agent_id,
                AgentChange::WorkingState { agent_id, .. }
                | AgentChange::WorkNoted { agent_id, .. }
                | AgentChange::WorkCleared { agent_id, .. }
                | AgentChange::WaitsHeld { agent_id, .. }
                | AgentChange::WaitsReleased { agent_id, .. }
                | AgentChange::MemoryAdded { agent_id, .. }
                | AgentChange::MemoryDeleted { agent_id, .. }
                | AgentChange::Tokens { agent_id, .. }
                | AgentChange::Paused { agent_id, .. }
                | AgentChange::GoalOpened { agent_id, .. }
                | AgentChange::HistorySummarized { agent_id, .. }
                | AgentChange::GoalClosed { agent_id, .. }
                | AgentChange::PrivateMessage { agent_id, .. }
                | AgentChange::PrivateReplied { agent_id, .. }
                | AgentChange::Notice { agent_id, .. }
                | AgentChange::Received { agent_id, .. }
                | AgentChange::PrivateTrimmed { agent_id, .. } => agent_id,
            }),
            Change::Step(s) => Some(match s {
                StepChange::Added { agent_id, .. }
                | StepChange::Started { agent_id, .. }
                | StepChange::Updated { agent_id, .. }
                | StepChange::Removed { agent_id, .. }
                | StepChange::CutLoose { agent_id, .. } => agent_id,
            }),
            _ => None,
        }
    }

    /// A change only its agent (a human) may see: their private chats and notices (and
    /// receipts, which no one else needs).
    pub fn private_to(&self) -> Option<&AgentId> {
        match self {
            Change::Agent(
                AgentChange::PrivateMessage { agent_id, .. }
                | AgentChange::PrivateReplied { agent_id, .. }
                | AgentChange::Notice { agent_id, .. }
                | AgentChange::Received { agent_id, .. }
                | AgentChange::PrivateTrimmed { agent_id, .. },
            ) => Some(agent_id),
            _ => None,
        }
    }
}

/// A change with its place in the team's history: `version` grows by one with every change of
/// the whole team, so a reader can order changes and drop those it already has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The change's place in the team's history (one more than the change before it).
    pub version: u64,
    /// When it was published, in milliseconds since the Unix epoch.
    pub at: i64,
    /// What changed; on the wire its fields sit beside `version` and `at`.
    #[serde(flatten)]
    pub change: Change,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
