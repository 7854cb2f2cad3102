//! The Dispatcher: delivers each routed message to its receivers' mailboxes, in the order it
//! was routed. SyncState has already recorded it (numbered, in its task's conversation pool);
//! a receiver the team does not have is acknowledged here, so the message leaves the messages
//! in flight instead of waiting there for ever.

use super::agent::Deliver;
use crate::event::{AgentChange, Change};
use crate::ids::AgentId;
use crate::message::Message;
use crate::monitor::Monitor;
use actix::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

pub struct Dispatcher {
    agents: HashMap<AgentId, Recipient<Deliver>>,
    monitor: Monitor,
}

impl Dispatcher {
    pub fn new(monitor: Monitor) -> Self {
        Dispatcher {
            agents: HashMap::new(),
            monitor,
        }
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
