//! The agent actor's whole protocol: every message it handles, with what it answers. The
//! handlers live with the concept each message belongs to (see the map in `mod.rs`).

use actix::prelude::*;
use cohort_core::ids::{AgentId, StepId};
use cohort_core::message::Message;
use cohort_core::state::{AgentSettings, AgentState, ModelWait};
use cohort_core::step::HumanMessage;
use cohort_core::step::approval::{Verdict, VerdictError};
use cohort_core::step::cancel::CancelError;
use std::sync::Arc;

/// A message for this agent from the dispatcher, with SyncState's number for it (the agent
/// acknowledges it; 0: a message no one tracks). Handled in `receive.rs`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Deliver(pub u64, pub Arc<Message>);

/// A copy of the agent's state.
#[derive(Message)]
#[rtype(result = "AgentState")]
pub struct GetAgentState;

/// The settings the agent follows (what its team file made of it).
#[derive(Message)]
#[rtype(result = "Arc<AgentSettings>")]
pub struct GetAgentSettings;

/// A step's model call began (`Some`) or stopped (`None`) waiting for its endpoint (sent by
/// the agent's own calls; see `model.rs`).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ModelWaiting(pub StepId, pub Option<ModelWait>);

/// A person cancels step `step_id` of this agent, with an optional reason (see `cancel.rs`).
#[derive(Message)]
#[rtype(result = "Result<(), CancelError>")]
pub struct CancelStep {
    pub step_id: StepId,
    pub by: AgentId,
    pub reason: String,
}

/// A person's verdict on a step waiting for approval, a plan's check or a call's arguments
/// (see `verdict.rs`).
#[derive(Message)]
#[rtype(result = "Result<(), VerdictError>")]
pub struct Decide {
    pub step_id: StepId,
    pub by: AgentId,
    pub verdict: Verdict,
}

/// An operator pauses (`true`) or resumes the agent. A paused agent finishes the step it
/// runs, keeps taking messages, and starts no step until resumed (see `control.rs`).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetPaused(pub bool);

/// The agent moves to another node of the team: it stops once its steps under way have
/// landed, within the deadline given (see `retire.rs`). Answered true once it has stopped.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct Retire(pub std::time::Duration);

/// A person's message, sent as this human agent (one message per receiver, each answering
/// that receiver's pending wait). Answered with the messages sent, or why nothing was sent
/// (see `human.rs`).
#[derive(Message)]
#[rtype(result = "Result<Vec<Message>, SendRefused>")]
pub struct HumanSend(pub HumanMessage);

/// Why a person's message did not go out.
#[derive(Debug, thiserror::Error)]
pub enum SendRefused {
    /// It is not a message this person may send (see `HumanError`).
    #[error(transparent)]
    Human(#[from] cohort_core::step::HumanError),
    /// SyncState refused it.
    #[error(transparent)]
    Refused(cohort_core::team::SyncError),
    /// The team is not running.
    #[error("the team is not running: {0}")]
    NotRunning(String),
}
