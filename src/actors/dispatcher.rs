//! The Dispatcher: delivers each routed message to its receivers' mailboxes, in the order it
//! was routed. SyncState has already recorded it (numbered, in its task's conversation pool);
//! a receiver the team does not have is acknowledged here, so the message leaves the messages
//! in flight instead of waiting there for ever.

use super::agent::{Decide, Deliver};
use crate::event::{AgentChange, Change};
use crate::ids::AgentId;
use crate::message::Message;
use crate::monitor::Monitor;
use actix::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

pub struct Dispatcher {
    agents: HashMap<AgentId, Recipient<Deliver>>,
    /// Where a person's verdict on an agent's tool call goes (agents that use tools).
    verdicts: HashMap<AgentId, Recipient<Decide>>,
    monitor: Monitor,
}

impl Dispatcher {
    pub fn new(monitor: Monitor) -> Self {
        Dispatcher {
            agents: HashMap::new(),
            verdicts: HashMap::new(),
            monitor,
        }
    }
}

/// Registers where verdicts on `AgentId`'s tool calls go.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RegisterVerdicts(pub AgentId, pub Recipient<Decide>);

impl Handler<RegisterVerdicts> for Dispatcher {
    type Result = ();
    fn handle(&mut self, msg: RegisterVerdicts, _: &mut Context<Self>) {
        self.verdicts.insert(msg.0, msg.1);
    }
}

/// A person's verdict for one agent's step; `Err` says why nothing was decided.
#[derive(Message)]
#[rtype(result = "Result<(), VerdictRefused>")]
pub struct DecideFor(pub AgentId, pub Decide);

/// Why a verdict was not taken.
#[derive(Debug, thiserror::Error)]
pub enum VerdictRefused {
    #[error("no agent `{0}`")]
    NoAgent(AgentId),
    #[error("agent `{0}` did not answer: {1}")]
    Unreachable(AgentId, String),
    #[error(transparent)]
    Refused(#[from] crate::agent::approval::VerdictError),
}

impl Handler<DecideFor> for Dispatcher {
    type Result = ResponseFuture<Result<(), VerdictRefused>>;
    fn handle(&mut self, DecideFor(agent, d): DecideFor, _: &mut Context<Self>) -> Self::Result {
        let to = self.verdicts.get(&agent).cloned();
        Box::pin(async move {
            let to = to.ok_or_else(|| VerdictRefused::NoAgent(agent.clone()))?;
            match to.send(d).await {
                Ok(r) => Ok(r?),
                Err(e) => Err(VerdictRefused::Unreachable(agent, e.to_string())),
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
