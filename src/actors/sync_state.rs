//! The SyncState actor: the only writer of tasks and stages. It applies executed steps'
//! outputs with the pure `SyncCore`, publishes the changes, asks the supervisor to start the
//! agents a manager hired, routes the resulting messages and answers ask_info queries.

use super::dispatcher::{Dispatcher, Route, SetSync};
use super::supervisor::Hire;
use crate::message::{ExecuteOutput, Message};
use crate::monitor::Monitor;
use crate::sync::{Applied, SyncCore, SyncError};
use actix::prelude::*;

pub struct SyncStateActor {
    core: SyncCore,
    dispatcher: Addr<Dispatcher>,
    monitor: Monitor,
    /// Where hires go (None: this team cannot hire).
    hiring: Option<Recipient<Hire>>,
}

impl SyncStateActor {
    pub fn new(
        core: SyncCore,
        dispatcher: Addr<Dispatcher>,
        monitor: Monitor,
        hiring: Option<Recipient<Hire>>,
    ) -> Self {
        SyncStateActor {
            core,
            dispatcher,
            monitor,
            hiring,
        }
    }

    fn effect(&mut self, mut applied: Applied, ctx: &mut Context<Self>) {
        self.monitor.publish(std::mem::take(&mut applied.changes));
        let hires = std::mem::take(&mut applied.new_agents);
        match (&self.hiring, hires.is_empty()) {
            (_, true) => self.route(applied),
            (None, false) => {
                tracing::error!("a hire was accepted, but this team has no supervisor");
                self.route(applied);
            }
            // New agents first: SyncState takes no other message until the supervisor has
            // started them and registered them with the dispatcher, so whatever is routed
            // next, here or later, can already reach them.
            (Some(hiring), false) => {
                let hiring = hiring.clone();
                let started = async move {
                    for m in hires {
                        let id = m.id.clone();
                        match hiring.send(Hire(m)).await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => tracing::error!(agent = %id, "hire failed: {e}"),
                            Err(e) => tracing::error!(agent = %id, "hire failed: {e}"),
                        }
                    }
                };
                ctx.wait(
                    started
                        .into_actor(self)
                        .map(move |(), act, _| act.route(applied)),
                );
            }
        }
    }

    /// Sends the output's messages (and answers) on once everything published before them is
    /// stored: a receiver never acts on a message whose sending step a restart would lose.
    /// Without a store they go at once.
    fn route(&mut self, applied: Applied) {
        let mut out = applied.messages;
        for (asker, q) in &applied.queries {
            let monitor = &self.monitor;
            out.push(
                self.core
                    .answer(asker, q, &|id| agent_with_steps(monitor, id)),
            );
        }
        if out.is_empty() {
            return;
        }
        let dispatcher = self.dispatcher.clone();
        self.monitor.publish_then(
            Vec::new(),
            Box::new(move || {
                for m in out {
                    dispatcher.do_send(Route(m));
                }
            }),
        );
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
    crate::clock::local_timestamp()
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
pub struct Delivered(pub std::sync::Arc<Message>);

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
