//! An agent's settings: what the team file (and the team) tell an agent's step machine, never
//! part of its stored state; and [`Agent`], the state with its settings, as the step machine
//! reads and changes it. A state read back from a store or a snapshot is given its settings
//! anew from the team file that runs it, so a stored state never carries stale ones.

use super::{AgentState, StepLimits, WaitPatience};
use crate::ids::TaskId;
use crate::policy::{ApprovalPolicy, Repairs};
use crate::texts::Texts;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// The team file's settings one agent's steps follow. Built once per agent when its actor is
/// made, shared as `Arc` and never serialised.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentSettings {
    /// The longest text a step of this agent keeps (`retention.step_chars`); longer text is
    /// cut in the middle when the step is added or updated.
    pub step_chars: usize,
    /// The bytes one of this person's private conversations keeps (the memory budget's
    /// share); the oldest messages leave first.
    pub private_bytes: usize,
    /// How far this agent may go on in one stage (`step_limits:`, with its own
    /// `parallel_steps`).
    pub step_limits: StepLimits,
    /// When its tool calls wait for a person (`tool_approval:`).
    pub tool_approval: ApprovalPolicy,
    /// Which of its model's slips the runtime mends (`repairs:`).
    pub repairs: Repairs,
    /// How long it waits for a reply before it decides without one (`waits:`).
    pub wait_patience: WaitPatience,
    /// The team's base task (where goals arrive and tasks are created), when known.
    pub base_task: Option<TaskId>,
    /// Its model calls tools natively (`tool_calling: native`): tool steps run the native
    /// tool loop, and plans need no instruction_generation.
    pub native_tools: bool,
    /// The runtime's texts in the team's language, for the steps and notices it writes for
    /// this agent.
    pub texts: Arc<Texts>,
}

impl Default for AgentSettings {
    /// What an agent follows when the team file says nothing (and in English).
    fn default() -> Self {
        AgentSettings {
            step_chars: super::DEFAULT_STEP_CHARS,
            private_bytes: super::PRIVATE_BYTES_KEPT,
            step_limits: StepLimits::default(),
            tool_approval: ApprovalPolicy::default(),
            repairs: Repairs::default(),
            wait_patience: WaitPatience::default(),
            base_task: None,
            native_tools: false,
            texts: Texts::english(),
        }
    }
}

/// An agent as its step machine sees it: its state (what is stored and published) and its
/// settings (what the team file says). It reads as its state (`Deref`), so the step machine's
/// code reads state fields as before and settings as `agent.settings.…`.
#[derive(Clone, Debug, PartialEq)]
pub struct Agent {
    /// What is stored and published of the agent.
    pub state: AgentState,
    /// What the team file tells it, shared with whoever made it.
    pub settings: Arc<AgentSettings>,
}

impl Agent {
    /// `state` following `settings`.
    pub fn new(state: AgentState, settings: Arc<AgentSettings>) -> Self {
        Agent { state, settings }
    }

    /// Its settings to change (a copy of its own if they are shared): for whoever makes the
    /// agent, before it runs.
    pub fn settings_mut(&mut self) -> &mut AgentSettings {
        Arc::make_mut(&mut self.settings)
    }

    /// Its state, without the settings.
    pub fn into_state(self) -> AgentState {
        self.state
    }
}

impl From<AgentState> for Agent {
    /// `state` with the default settings.
    fn from(state: AgentState) -> Self {
        Agent::new(state, Arc::default())
    }
}

impl Deref for Agent {
    type Target = AgentState;

    fn deref(&self) -> &AgentState {
        &self.state
    }
}

impl DerefMut for Agent {
    fn deref_mut(&mut self) -> &mut AgentState {
        &mut self.state
    }
}
