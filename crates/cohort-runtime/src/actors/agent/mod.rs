//! The agent actor: owns one AgentState. It runs the next step whenever it runs none, its step
//! lock is empty and `todo` is not; the step's LLM call runs as a spawned future, so the
//! mailbox keeps taking messages (a reply that frees the lock, a finish_stage) meanwhile.
//!
//! What it is doing is one `Phase` (`phase.rs`); the files, by concept:
//!
//! | file | job |
//! |---|---|
//! | `messages.rs` | its whole protocol: every message it handles |
//! | `phase.rs` | what it is doing: idle, running, held for a person, settling, … |
//! | `outlet.rs` | where its own changes go: the monitor, or the running node over NATS |
//! | `commit.rs` | where its changes go: published, or handed to SyncState (`commit`) |
//! | `next_step.rs` | when it starts its next step, and how by the step's executor |
//! | `llm_call.rs` | a skill step's prompt, its model call and the answer |
//! | `model.rs` | what every model call of a step shares: its request, waits, progress, cost |
//! | `summary.rs` | a summary of older history written before a step that leaves it out |
//! | `tool_call.rs` | a tool step's MCP call, and one a restart cut off |
//! | `tool_gate.rs` | the gate before a tool call: its risk, and a person's approval |
//! | `tool_loop.rs` | the native tool loop: the model calls tools as functions |
//! | `settle.rs` | a step's end: stored through SyncState, then what follows it |
//! | `person.rs` | steps that wait for a person (approval, a plan's check, arguments) |
//! | `verdict.rs` | a person's verdict on such a step |
//! | `cancel.rs` | a step ended early: cancelled by a person, or its work ended under it |
//! | `control.rs` | an operator's pause |
//! | `retire.rs` | leaving this node for another node of the team |
//! | `receive.rs` | a message delivered to the agent |
//! | `human.rs` | a human agent sending what its person writes |
//! | `timers.rs` | the timer for its replies' wait deadlines |

use actix::prelude::*;
use cohort_core::ids::AgentId;
use cohort_core::prompt::PromptSet;
use cohort_core::state::{Agent, StepState};
use cohort_llm::ChatModel;
use cohort_mcp::McpClient;
use std::collections::BTreeMap;
use std::sync::Arc;

mod cancel_step;
mod commit;
mod control;
mod deliver;
mod elicit;
mod human_send;
mod llm_call;
mod mcp_call;
mod messages;
mod model;
mod native_loop;
mod next_step;
mod outlet;
mod person;
mod phase;
mod refused_call;
mod replay_turns;
mod retire;
mod step_end;
mod summary;
mod timers;
mod tool_gate;
mod verdict;

pub use commit::SyncLink;
pub use messages::{
    CancelStep, Decide, Deliver, GetAgentSettings, GetAgentState, HumanSend, Retire, SendRefused,
    SetPaused,
};
pub use outlet::Outlet;

/// What an agent needs to use tools: the servers' descriptions (for its prompts) and the
/// team's shared MCP client.
#[derive(Clone, Default)]
pub struct AgentTools {
    pub descriptions: Arc<BTreeMap<String, String>>,
    pub mcp: Option<Arc<McpClient>>,
    /// The people asked to approve a tool call (the team's operators).
    pub approvers: Arc<[AgentId]>,
}

/// How many finished `no_relative` steps of a task an agent keeps in its step list (the base
/// task never ends; see `AgentState::trim_loose_history`). Prompts show fewer than this.
const LOOSE_HISTORY_KEPT: usize = 64;

/// How long a tool call waits for the store to confirm its step started.
const STORE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

pub struct AgentActor {
    /// Its state and the settings it follows.
    state: Agent,
    /// None for a human agent: its steps record what the person did and never run.
    llm: Option<Arc<dyn ChatModel>>,
    /// The team's named models, which a message may choose for its steps (`models:`).
    named_models: NamedModels,
    prompts: Arc<PromptSet>,
    tool_descriptions: Arc<BTreeMap<String, String>>,
    /// The team's one MCP client (None when the team has no servers).
    mcp: Option<Arc<McpClient>>,
    sync: SyncLink,
    /// Where its own changes go (see `outlet.rs`).
    outlet: Arc<dyn Outlet>,
    /// What the agent is doing.
    phase: phase::Phase,
    /// The hand-overs SyncState has not answered yet (see `commit.rs`).
    unanswered: commit::Unanswered,
    /// The timer for the soonest wait deadline on the step lock.
    wait_timer: timers::WaitTimer,
    /// Who is asked to approve a tool call.
    approvers: Arc<[AgentId]>,
    /// The steps the team may still start (`cohort run --max-steps`), shared by its agents.
    allowance: super::StepAllowance,
    /// Set while it moves to another node (see `retire.rs`): told once it has stopped.
    retiring: Option<tokio::sync::oneshot::Sender<bool>>,
    /// The messages it took lately (see `receive.rs`).
    taken: deliver::Taken,
    /// What each tool call under way has taken so far: retries, repairs (see `tool_call.rs`).
    tool_attempts:
        std::collections::HashMap<cohort_core::ids::StepId, cohort_core::step::ToolAttempts>,
    /// How many messages it has taken, which its model calls read (see `call::Intake`).
    intake: cohort_llm::Intake,
    /// In a replay, the record's order of its messages and steps (see `replay_turns.rs`).
    turns: replay_turns::Turns,
}

impl AgentActor {
    pub fn new(
        state: Agent,
        llm: Option<Arc<dyn ChatModel>>,
        prompts: Arc<PromptSet>,
        tools: AgentTools,
        sync: SyncLink,
        outlet: Arc<dyn Outlet>,
    ) -> Self {
        let AgentTools {
            descriptions: tool_descriptions,
            mcp,
            approvers,
        } = tools;
        AgentActor {
            state,
            llm,
            named_models: NamedModels::default(),
            prompts,
            tool_descriptions,
            mcp,
            sync,
            outlet,
            phase: phase::Phase::default(),
            unanswered: commit::Unanswered::default(),
            wait_timer: None,
            approvers,
            allowance: super::StepAllowance::unlimited(),
            retiring: None,
            taken: deliver::Taken::default(),
            tool_attempts: Default::default(),
            intake: Default::default(),
            turns: Default::default(),
        }
    }

    /// The same agent, starting steps only while `allowance` has some left.
    pub fn with_allowance(mut self, allowance: super::StepAllowance) -> Self {
        self.allowance = allowance;
        self
    }

    /// The same agent, with the team's named models a message may choose.
    pub fn with_named_models(mut self, models: NamedModels) -> Self {
        self.named_models = models;
        self
    }

    /// The same agent, taking its messages and starting its steps in `record`'s order (a
    /// replay), or as they come (None).
    pub fn with_replay(mut self, record: Option<Arc<cohort_llm::replay::Record>>) -> Self {
        self.turns = replay_turns::Turns::of(record);
        self
    }

    /// The model `step` calls: the named model its message chose, else the agent's own (none
    /// for a person). A choice the team no longer has (a team file edited since) falls back
    /// to the agent's own, with a warning in the log.
    fn model_for(&self, step: &StepState) -> Option<&Arc<dyn ChatModel>> {
        let own = self.llm.as_ref()?;
        let Some(name) = cohort_core::state::chosen_model(step) else {
            return Some(own);
        };
        match self.named_models.get(name) {
            Some(m) => Some(m),
            None => {
                tracing::warn!(step = %step.step_id, model = name, "the chosen model is not the team's; the agent's own answers");
                Some(own)
            }
        }
    }
}

/// The team's named models by name (`models:` in the team file).
pub type NamedModels = Arc<std::collections::HashMap<String, Arc<dyn ChatModel>>>;

impl Actor for AgentActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // The factory published the agent before starting it; anything since goes out now.
        self.publish();
        // An agent carried over from a store: a tool call the restart cut off is made again
        // if its tool says that is harmless, else settled as a failed call; then whatever its
        // queue holds runs.
        for id in cohort_core::step::interrupted_tool_steps(&self.state) {
            self.phase.start(id.clone());
            self.resume_tool_step(id, ctx);
        }
        // A call that was waiting for a person's approval waits on (they were told already).
        if let Some(id) = cohort_core::step::approval::waiting_for_approval(&self.state) {
            if self.approvers.is_empty() {
                let why = self.state.settings.texts.approval_nobody_left();
                self.fail_waiting(id, why, ctx);
            } else {
                // A tool call that waits is the agent's current step (its verdict runs it); a
                // plan that waits was settled already, and nothing runs until it is checked.
                self.hold_for_a_person(id, ctx);
            }
        }
        self.try_run(ctx);
    }
}

impl Handler<GetAgentState> for AgentActor {
    type Result = MessageResult<GetAgentState>;
    fn handle(&mut self, _: GetAgentState, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.state.state.clone())
    }
}

impl Handler<GetAgentSettings> for AgentActor {
    type Result = MessageResult<GetAgentSettings>;
    fn handle(&mut self, _: GetAgentSettings, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.state.settings.clone())
    }
}
