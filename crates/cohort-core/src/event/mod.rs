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
//! - [`states`]: `States`, a reader's copy of the whole team built from changes, with the
//!   bookkeeping a reader needs (steps that left their agent, evicted tasks, counters).

pub mod apply;
pub mod deliveries;
pub mod record;
pub mod states;
pub mod times;

use crate::ids::{AgentId, StageId, StageRef, StepId, TaskId, WaitId};
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
    Task(TaskChange),
    Stage(StageChange),
    Agent(AgentChange),
    Step(StepChange),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TaskChange {
    Created {
        task: TaskState,
    },
    Joined {
        task_id: TaskId,
        agents: Vec<AgentId>,
    },
    State {
        task_id: TaskId,
        execution_state: ExecutionState,
        #[serde(skip_serializing_if = "Option::is_none")]
        task_summary: Option<String>,
        /// Why it ended as it did, when there is more to say than its state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Box<crate::state::TaskEnd>>,
    },
    SharedInfo {
        task_id: TaskId,
        entry: SharedInfo,
    },
    /// A message was routed: it joins the task's conversation pool and is in flight until
    /// each receiver took it ([`deliveries`]). Numbered by SyncState (0: not tracked).
    Conversation {
        task_id: TaskId,
        entry: ConversationEntry,
        #[serde(default, skip_serializing_if = "is_zero")]
        message_no: u64,
    },
    /// The oldest entries of the shared pools left memory (a long-lived task's pools are
    /// capped); the task counts what it no longer holds.
    Trimmed {
        task_id: TaskId,
        shared_info: usize,
        conversation: usize,
    },
    Tokens {
        task_id: TaskId,
        usage: TokenUsage,
    },
    /// Repair rules fired on one of the task's steps (`policy::repairs`).
    Repaired {
        task_id: TaskId,
        rules: Vec<crate::policy::Repair>,
    },
    /// An operator paused (or resumed) the task: its agents start none of its steps.
    Paused {
        task_id: TaskId,
        paused: bool,
    },
    /// A finished task left memory (retention); readers keep only the one-line summary.
    Evicted {
        task_id: TaskId,
        summary: TaskSummaryLine,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StageChange {
    /// A new stage, placed at `list_at` in its task's stage list (not `at`: an event's `at`
    /// is its time).
    Added { stage: StageState, list_at: usize },
    State {
        stage_id: StageId,
        execution_state: ExecutionState,
    },
    Agent {
        stage_id: StageId,
        agent_id: AgentId,
        state: StageAgentState,
    },
    /// An allocated agent's completion summary (it is finished in the stage from then on).
    Completion {
        stage_id: StageId,
        agent_id: AgentId,
        summary: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AgentChange {
    Added {
        agent: Box<AgentState>,
    },
    WorkingState {
        agent_id: AgentId,
        state: WorkingState,
    },
    /// The task (and stage) has an entry in working memory.
    WorkNoted {
        agent_id: AgentId,
        task_id: TaskId,
        #[serde(skip_serializing_if = "Option::is_none")]
        stage_id: Option<StageRef>,
    },
    /// The stage's entry (or with no stage, the task's) left working memory.
    WorkCleared {
        agent_id: AgentId,
        task_id: TaskId,
        #[serde(skip_serializing_if = "Option::is_none")]
        stage_id: Option<StageRef>,
    },
    /// Waits taken: `ids[i]` waits for the reply of `from[i]` until `until[i]` (ms since the
    /// Unix epoch). `from` and `until` are empty in events stored before waits had them.
    WaitsHeld {
        agent_id: AgentId,
        task_id: TaskId,
        stage_id: StageRef,
        ids: Vec<WaitId>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        from: Vec<AgentId>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        until: Vec<i64>,
    },
    WaitsReleased {
        agent_id: AgentId,
        ids: Vec<WaitId>,
    },
    MemoryAdded {
        agent_id: AgentId,
        key: String,
        text: String,
    },
    MemoryDeleted {
        agent_id: AgentId,
        key: String,
    },
    Tokens {
        agent_id: AgentId,
        usage: TokenUsage,
    },
    /// An operator paused (or resumed) the agent, or only its work for one task.
    Paused {
        agent_id: AgentId,
        paused: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<TaskId>,
    },
    /// The agent owes a summary in this stage (bookkeeping for its closing reflection).
    GoalOpened {
        agent_id: AgentId,
        task_id: TaskId,
        stage_id: StageId,
    },
    GoalClosed {
        agent_id: AgentId,
        task_id: TaskId,
        stage_id: StageId,
    },
    /// The agent summarized the older history of a task and stage (replacing its summary).
    HistorySummarized {
        agent_id: AgentId,
        summary: crate::state::HistorySummary,
    },
    /// A human's private conversation with `with` got a message (private to the human).
    PrivateMessage {
        agent_id: AgentId,
        with: AgentId,
        entry: PrivateMessage,
    },
    /// The human answered the message at `index` of its conversation with `with`.
    PrivateReplied {
        agent_id: AgentId,
        with: AgentId,
        index: usize,
    },
    /// A notice for the human (private to the human).
    Notice {
        agent_id: AgentId,
        text: String,
    },
    /// The agent took routed message `message_no` (stored with what it did with it).
    Received {
        agent_id: AgentId,
        message_no: u64,
    },
    /// The oldest `count` entries of a conversation (or of the notices, with no `with`) left
    /// memory: a person's pools are capped like every other list.
    PrivateTrimmed {
        agent_id: AgentId,
        #[serde(skip_serializing_if = "Option::is_none")]
        with: Option<AgentId>,
        count: usize,
    },
}

/// What an update sets on a step; fields left `None` keep their value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_state: Option<StepExecutionState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execute_result: Option<Box<crate::state::StepResult>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction_content: Option<Value>,
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StepChange {
    /// A new step at `list_at` in the agent's step list and, when it is to run, at `todo_at`
    /// in its queue; `remember` records it in working memory under its task and stage.
    Added {
        agent_id: AgentId,
        step: Box<StepState>,
        list_at: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        todo_at: Option<usize>,
        remember: bool,
    },
    /// The step left the queue and runs.
    Started { agent_id: AgentId, step_id: StepId },
    Updated {
        agent_id: AgentId,
        step_id: StepId,
        #[serde(flatten)]
        update: StepUpdate,
    },
    /// The steps left the agent's list, queue and working memory (their work was finished,
    /// or they are old history); they keep the record they had.
    Removed {
        agent_id: AgentId,
        step_ids: Vec<StepId>,
    },
    /// Running steps whose work was finished under them: they end, but belong to it no more.
    CutLoose {
        agent_id: AgentId,
        step_ids: Vec<StepId>,
    },
}

/// The four kinds of state a change belongs to (and that clients read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateKind {
    Task,
    Stage,
    Agent,
    Step,
}

impl StateKind {
    pub const ALL: [StateKind; 4] = [
        StateKind::Task,
        StateKind::Stage,
        StateKind::Agent,
        StateKind::Step,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StateKind::Task => "task",
            StateKind::Stage => "stage",
            StateKind::Agent => "agent",
            StateKind::Step => "step",
        }
    }

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
    pub version: u64,
    /// When it was published, in milliseconds since the Unix epoch.
    pub at: i64,
    #[serde(flatten)]
    pub change: Change,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
