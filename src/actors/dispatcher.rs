//! The Dispatcher: delivers each routed message to its receivers' mailboxes, in the order it
//! was routed, then has SyncState record it in the task's conversation pool.

use super::agent::Deliver;
use super::sync_state::{Delivered, SyncStateActor};
use crate::ids::AgentId;
use crate::message::Message;
use actix::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Default)]
pub struct Dispatcher {
    agents: HashMap<AgentId, Recipient<Deliver>>,
    sync: Option<Addr<SyncStateActor>>,
}

impl Actor for Dispatcher {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Register(pub AgentId, pub Recipient<Deliver>);

#[derive(Message)]
#[rtype(result = "()")]
pub struct SetSync(pub Addr<SyncStateActor>);

#[derive(Message)]
#[rtype(result = "()")]
pub struct Route(pub Message);

impl Handler<Register> for Dispatcher {
    type Result = ();
    fn handle(&mut self, msg: Register, _: &mut Context<Self>) {
        self.agents.insert(msg.0, msg.1);
    }
}

impl Handler<SetSync> for Dispatcher {
    type Result = ();
    fn handle(&mut self, msg: SetSync, _: &mut Context<Self>) {
        self.sync = Some(msg.0);
    }
}

impl Handler<Route> for Dispatcher {
    type Result = ();
    fn handle(&mut self, Route(m): Route, _: &mut Context<Self>) {
        // One message shared by every receiver and the record: a broadcast to a thousand
        // agents copies nothing.
        let m = Arc::new(m);
        for r in &m.receiver {
            match self.agents.get(r) {
                Some(agent) => agent.do_send(Deliver(m.clone())),
                None => tracing::warn!(receiver = %r, task = %m.task_id, "no agent to deliver to"),
            }
        }
        if let Some(sync) = &self.sync {
            sync.do_send(Delivered(m));
        }
    }
}
