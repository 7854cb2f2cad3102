//! The Dispatcher: delivers each routed message to its receivers' mailboxes, in the order it
//! was routed. SyncState has already recorded it (numbered, in its task's conversation pool);
//! a receiver the team does not have is acknowledged here, so the message leaves the messages
//! in flight instead of waiting there for ever.

use super::agent::{CancelStep, Decide, Deliver, SetPaused};
use crate::monitor::Monitor;
use actix::prelude::*;
use cohort_core::event::{AgentChange, Change};
use cohort_core::ids::AgentId;
use cohort_core::message::Message;
use std::collections::HashMap;
use std::sync::Arc;

pub struct Dispatcher {
    agents: HashMap<AgentId, Recipient<Deliver>>,
    /// The agents themselves, for a person's control (a verdict on a tool call, a pause).
    controls: HashMap<AgentId, Controls>,
    monitor: Monitor,
}

impl Dispatcher {
    pub fn new(monitor: Monitor) -> Self {
        Dispatcher {
            agents: HashMap::new(),
            controls: HashMap::new(),
            monitor,
        }
    }
}

/// Where a person's control of one agent goes: its actor, or its stand-in on this node when
/// it runs on another node of the team.
#[derive(Clone)]
pub struct Controls {
    decide: Recipient<Decide>,
    cancel: Recipient<CancelStep>,
    pause: Recipient<SetPaused>,
}

impl Controls {
    /// The controls of the agent (or stand-in) at `to`.
    pub fn of<A>(to: &Addr<A>) -> Self
    where
        A: Actor<Context = Context<A>> + Handler<Decide> + Handler<CancelStep> + Handler<SetPaused>,
    {
        Controls {
            decide: to.clone().recipient(),
            cancel: to.clone().recipient(),
            pause: to.clone().recipient(),
        }
    }
}

/// Registers an agent for a person's control.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterControl(pub AgentId, pub Controls);

impl Handler<RegisterControl> for Dispatcher {
    type Result = ();
    fn handle(&mut self, msg: RegisterControl, _: &mut Context<Self>) {
        self.controls.insert(msg.0, msg.1);
    }
}

/// An operator pauses (`true`) or resumes an agent; `Err` if there is no such agent.
#[derive(Message)]
#[rtype(result = "Result<(), ControlRefused>")]
pub struct PauseFor(pub AgentId, pub bool);

impl Handler<PauseFor> for Dispatcher {
    type Result = ResponseFuture<Result<(), ControlRefused>>;
    fn handle(&mut self, PauseFor(agent, paused): PauseFor, _: &mut Context<Self>) -> Self::Result {
        let to = self.controls.get(&agent).cloned();
        Box::pin(async move {
            let to = to.ok_or_else(|| ControlRefused::NoAgent(agent.clone()))?;
            to.pause
                .send(SetPaused(paused))
                .await
                .map_err(|e| ControlRefused::Unreachable(agent, e.to_string()))
        })
    }
}

/// A person's verdict for one agent's step; `Err` says why nothing was decided.
#[derive(Message)]
#[rtype(result = "Result<(), ControlRefused>")]
pub struct DecideFor(pub AgentId, pub Decide);

/// Why a person's control (a verdict, a pause, a cancel) reached no agent or was refused.
#[derive(Debug, thiserror::Error)]
pub enum ControlRefused {
    #[error("no agent `{0}`")]
    NoAgent(AgentId),
    #[error("agent `{0}` did not answer: {1}")]
    Unreachable(AgentId, String),
    #[error(transparent)]
    Refused(#[from] cohort_core::step::approval::VerdictError),
    #[error(transparent)]
    NotCancelled(#[from] cohort_core::step::cancel::CancelError),
}

/// A person cancels one agent's step; `Err` says why nothing was cancelled.
#[derive(Message)]
#[rtype(result = "Result<(), ControlRefused>")]
pub struct CancelStepFor(pub AgentId, pub super::CancelStep);

impl Handler<CancelStepFor> for Dispatcher {
    type Result = ResponseFuture<Result<(), ControlRefused>>;
    fn handle(
        &mut self,
        CancelStepFor(agent, c): CancelStepFor,
        _: &mut Context<Self>,
    ) -> Self::Result {
        let to = self.controls.get(&agent).cloned();
        Box::pin(async move {
            let to = to.ok_or_else(|| ControlRefused::NoAgent(agent.clone()))?;
            match to.cancel.send(c).await {
                Ok(r) => Ok(r?),
                Err(e) => Err(ControlRefused::Unreachable(agent, e.to_string())),
            }
        })
    }
}

impl Handler<DecideFor> for Dispatcher {
    type Result = ResponseFuture<Result<(), ControlRefused>>;
    fn handle(&mut self, DecideFor(agent, d): DecideFor, _: &mut Context<Self>) -> Self::Result {
        let to = self.controls.get(&agent).cloned();
        Box::pin(async move {
            let to = to.ok_or_else(|| ControlRefused::NoAgent(agent.clone()))?;
            match to.decide.send(d).await {
                Ok(r) => Ok(r?),
                Err(e) => Err(ControlRefused::Unreachable(agent, e.to_string())),
            }
        })
    }
}

impl Actor for Dispatcher {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Register(pub AgentId, pub Recipient<Deliver>);

/// Message `message_no` to deliver: to all its receivers, or (`to`, after a restart) to those
/// that had not taken it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Route {
    pub message_no: u64,
    pub message: Arc<Message>,
    pub to: Option<Vec<AgentId>>,
}

impl Handler<Register> for Dispatcher {
    type Result = ();
    fn handle(&mut self, msg: Register, _: &mut Context<Self>) {
        self.agents.insert(msg.0, msg.1);
    }
}

impl Handler<Route> for Dispatcher {
    type Result = ();
    fn handle(&mut self, f: Route, _: &mut Context<Self>) {
        // One message shared by every receiver: a broadcast to a thousand agents copies
        // nothing.
        let mut unknown = Vec::new();
        for r in f.to.as_ref().unwrap_or(&f.message.receiver) {
            match self.agents.get(r) {
                Some(agent) => agent.do_send(Deliver(f.message_no, f.message.clone())),
                None => {
                    tracing::warn!(receiver = %r, task = %f.message.task_id, "no agent to deliver to");
                    unknown.push(Change::Agent(AgentChange::Received {
                        agent_id: r.clone(),
                        message_no: f.message_no,
                    }));
                }
            }
        }
        if !unknown.is_empty() && f.message_no > 0 {
            self.monitor.publish(unknown);
        }
    }
}
