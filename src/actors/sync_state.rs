//! The SyncState actor: the only writer of tasks and stages. It applies executed steps'
//! outputs with the pure `SyncCore`, starts the agents a manager created, routes the resulting
//! messages, answers ask_info queries and publishes the changes.

use super::dispatcher::{Dispatcher, Route, SetSync};
use super::factory::AgentFactory;
use crate::message::{ExecuteOutput, Message};
use crate::monitor::Monitor;
use crate::sync::{Applied, SyncCore, SyncError};
use actix::prelude::*;

pub struct SyncStateActor {
    core: SyncCore,
    dispatcher: Addr<Dispatcher>,
    monitor: Monitor,
    factory: AgentFactory,
}

impl SyncStateActor {
    pub fn new(core: SyncCore, factory: AgentFactory) -> Self {
        SyncStateActor {
            core,
            dispatcher: factory.dispatcher.clone(),
            monitor: factory.monitor.clone(),
            factory,
        }
    }

    fn effect(&mut self, applied: Applied, ctx: &mut Context<Self>) {
        // New agents first: their registration reaches the dispatcher before any message
        // routed below (one mailbox, in order), so they can be allocated at once.
        for m in &applied.new_agents {
            if self.factory.spawn_member(m, ctx.address()).is_none() {
                tracing::error!(agent = %m.id, "no template to start the new agent from");
            }
        }
        self.monitor.publish(applied.changes);
        for m in applied.messages {
            self.dispatcher.do_send(Route(m));
        }
        for (asker, q) in &applied.queries {
            let monitor = &self.monitor;
            let answer = self
                .core
                .answer(asker, q, &|id| agent_with_steps(monitor, id));
            self.dispatcher.do_send(Route(answer));
        }
    }
}

/// An agent's published state with its steps (the state lists them by id) under `steps`.
fn agent_with_steps(monitor: &Monitor, id: &crate::ids::AgentId) -> Option<serde_json::Value> {
    monitor.read(|s| {
        let agent = s.agents.get(id)?;
        let mut v = serde_json::to_value(agent).ok()?;
        v["steps"] = serde_json::to_value(agent.agent_step.steps()).ok()?;
        Some(v)
    })
}

fn now() -> String {
    chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string()
}

impl Actor for SyncStateActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.dispatcher.do_send(SetSync(ctx.address()));
        self.monitor.publish(self.core.initial_changes());
    }
}

/// An executed step's output; answered with SyncState's refusal if it refused it.
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct ApplyOutput(pub ExecuteOutput);

/// A message from outside the agents' steps (the operator's goal).
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct SubmitMessage(pub Message);

/// The dispatcher delivered this message: record it in its task's conversation pool.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Delivered(pub Message);

impl Handler<ApplyOutput> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, ApplyOutput(out): ApplyOutput, ctx: &mut Context<Self>) -> Self::Result {
        let mut applied = self.core.apply(&out, &now());
        let refused = applied.refused.take();
        self.effect(applied, ctx);
        refused.map_or(Ok(()), Err)
    }
}

impl Handler<SubmitMessage> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, SubmitMessage(m): SubmitMessage, ctx: &mut Context<Self>) -> Self::Result {
        let applied = self.core.submit(m)?;
        self.effect(applied, ctx);
        Ok(())
    }
}

impl Handler<Delivered> for SyncStateActor {
    type Result = ();
    fn handle(&mut self, Delivered(m): Delivered, _: &mut Context<Self>) {
        self.monitor.publish(self.core.record_delivery(m, &now()));
    }
}
