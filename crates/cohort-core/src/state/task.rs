//! TaskState: one goal, its task group, its ordered stages, its shared info and conversation
//! pools. Stages run one after another; at most one is running.

use super::{ExecutionState, TokenUsage};
use crate::ids::{AgentId, StageId, StageRef, TaskId};
use crate::message::Message;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

/// One line of the task's shared info pool: what an agent did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedInfo {
    /// The agent that shared it.
    pub agent_id: AgentId,
    /// That agent's role.
    pub role: String,
    /// The stage it was shared in, or `no_relative`.
    pub stage_id: StageRef,
    /// What was shared.
    pub content: String,
    /// When, as `%Y-%m-%d %H:%M:%S` local time.
    pub timestamp: String,
}

/// One delivered message in the task's conversation pool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConversationEntry {
    /// When it was delivered, as `%Y-%m-%d %H:%M:%S` local time.
    pub timestamp: String,
    /// Shared with the receivers' deliveries and every reader's copy (never copied).
    pub message: Arc<Message>,
}

/// One task (SPEC §2 TaskState); SyncState is its only writer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskState {
    /// The task's own id.
    pub task_id: TaskId,
    /// A short name for people.
    pub task_name: String,
    /// The task's goal.
    pub task_intention: String,
    /// The agent that manages the task: splits it into stages and judges them.
    pub task_manager: AgentId,
    /// The agents taking part, the manager first.
    pub task_group: Vec<AgentId>,
    /// What its agents shared, oldest first (capped).
    pub shared_info_pool: VecDeque<SharedInfo>,
    /// Every message delivered in the task, oldest first (capped).
    pub shared_conversation_pool: VecDeque<ConversationEntry>,
    /// How many of the oldest shared-info lines and conversation entries left memory (the
    /// pools of a long-lived task are capped).
    #[serde(default)]
    pub shared_info_omitted: u64,
    /// How many of the oldest conversation entries left memory.
    #[serde(default)]
    pub shared_conversation_omitted: u64,
    /// Stage ids in execution order; the stages themselves are published as stage state.
    pub stage_list: Vec<StageId>,
    /// Where the task is in its lifecycle.
    pub execution_state: ExecutionState,
    /// What the task gave, as its manager summed it up in `finish_task` (its words alone).
    pub task_summary: Option<String>,
    /// What the runtime wrote of that summary beside the manager's words, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_written: Option<Box<crate::report::TaskWritten>>,
    /// Tokens its steps spent, summed.
    #[serde(default)]
    pub token_usage: TokenUsage,
    /// Paused by an operator: its agents start none of its steps until it is resumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// How many times each repair rule fired on the task's steps (`policy::repairs`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub repairs: std::collections::BTreeMap<crate::policy::Repair, u64>,
    /// Once it ended: why it failed, and the stages that gave no result, when there is
    /// anything to say beyond its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Box<TaskEnd>>,
    /// The person whose goal the task serves: told how it ended (`Notice::TaskEnded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<AgentId>,
    /// The step that acted on the goal the task serves (`event::trace`: one goal, one trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_step: Option<crate::ids::StepId>,
    /// The OpenTelemetry trace its work is in (`event::trace::trace_of_task`, as 32 hex
    /// digits): what a person looks it up by in their trace viewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<crate::event::trace::TraceId>,
    /// The recorded task and step this task was forked from (`cohort replay --fork-at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// The files people attached to its goal and to its messages (the first
    /// [`MOST_ATTACHMENTS_PER_TASK`](crate::attachment::MOST_ATTACHMENTS_PER_TASK)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::attachment::Attachment>,
}

/// Where a forked task branched off: the task it replays and the step from which it went
/// its own way (with the live model, or an edited step text or agent prompt).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkedFrom {
    /// The recorded task.
    pub task_id: TaskId,
    /// The step of that task from which the fork went on alone.
    pub step_id: crate::ids::StepId,
}

/// Why a task ended as it did, beyond its state: what `cohort run`, the console and `export`
/// say about it. A finished task may still list stages that failed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskEnd {
    /// Why the task failed (absent when it finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Its stages that ended without a result, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_stages: Vec<FailedStage>,
}

/// A stage that ended without a result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedStage {
    /// The stage.
    pub stage_id: StageId,
    /// Its sub-goal.
    pub stage_intention: String,
    /// Why it gave no result.
    pub why: String,
}

impl TaskEnd {
    /// Whether it says nothing.
    pub fn is_empty(&self) -> bool {
        self.why.is_none() && self.failed_stages.is_empty()
    }

    /// One line for people: why it failed, and which stages gave no result.
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        let stages: Vec<String> = self
            .failed_stages
            .iter()
            .map(|s| t.stage_failed(&s.stage_intention, &s.why))
            .collect();
        self.why
            .iter()
            .cloned()
            .chain(stages)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl TaskState {
    /// A new task in `init`, its group holding only its manager.
    pub fn new(
        task_id: TaskId,
        task_name: String,
        task_intention: String,
        manager: AgentId,
    ) -> Self {
        TaskState {
            task_id,
            task_name,
            task_intention,
            task_group: vec![manager.clone()],
            task_manager: manager,
            shared_info_pool: VecDeque::new(),
            shared_conversation_pool: VecDeque::new(),
            shared_info_omitted: 0,
            shared_conversation_omitted: 0,
            stage_list: Vec::new(),
            execution_state: ExecutionState::Init,
            task_summary: None,
            summary_written: None,
            token_usage: TokenUsage::default(),
            paused: false,
            repairs: Default::default(),
            outcome: None,
            requested_by: None,
            goal_step: None,
            trace_id: None,
            attachments: Vec::new(),
            forked_from: None,
        }
    }

    /// Its summary as people and models read it: the manager's words with what the runtime
    /// wrote of it, marked (`None` until it has one).
    pub fn summary_text(&self, t: &crate::texts::Texts) -> Option<String> {
        let summary = self.task_summary.as_deref()?;
        Some(crate::report::TaskWritten::whole(
            summary,
            self.summary_written.as_deref(),
            t,
        ))
    }

    /// Adds agents to the task group, keeping order and skipping those already in it.
    pub fn join(&mut self, agents: impl IntoIterator<Item = AgentId>) {
        for a in agents {
            if !self.task_group.contains(&a) {
                self.task_group.push(a);
            }
        }
    }
}
