//! The SyncState actor: the only writer of tasks and stages. It applies executed steps'
//! outputs with the pure `SyncCore`, starts the agents a manager created, routes the resulting
//! messages, answers ask_info queries and publishes the changes.

use super::dispatcher::{Dispatcher, Route, SetSync};
use super::factory::AgentFactory;
use crate::message::{ExecuteOutput, Message};
use crate::monitor::{Monitor, StateKind};
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
        for id in &applied.tasks {
            if let Some(t) = self.core.task(id) {
                self.monitor.publish(StateKind::Task, id.as_str(), t);
            }
        }
        for id in &applied.stages {
            if let Some(s) = self.core.stage(id) {
                self.monitor.publish(StateKind::Stage, id.as_str(), s);
            }
        }
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
    let mut agent = monitor.get(StateKind::Agent, id.as_str())?;
    let steps: Vec<serde_json::Value> = agent
        .pointer("/agent_step/step_list")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str())
        .filter_map(|s| monitor.get(StateKind::Step, s))
        .collect();
    agent["steps"] = serde_json::Value::Array(steps);
    Some(agent)
}

fn now() -> String {
    chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string()
}

impl Actor for SyncStateActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.dispatcher.do_send(SetSync(ctx.address()));
        for t in self.core.tasks() {
            self.monitor.publish(StateKind::Task, t.task_id.as_str(), t);
        }
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
        if let Some(task) = self.core.record_delivery(m, &now()) {
            if let Some(t) = self.core.task(&task) {
                self.monitor.publish(StateKind::Task, task.as_str(), t);
            }
        }
    }
}
