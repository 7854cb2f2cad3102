//! The team's node answering the agents that run on other nodes (the [`ToCore`] calls on the
//! team's core subject): what an agent on this node asks of SyncState and the monitor
//! directly. One agent's calls are done in the order they were sent, each before the next
//! (its hand-over is answered before its next call is looked at); different agents' side by
//! side, on a thread of their own. A call under another hold than the agent's current one is
//! refused: an agent that moved, or whose node was given up for dead, changes nothing.

use super::bus::Bus;
use super::link::LinkError;
use super::wire::{CoreAnswer, CoreCall, CoreRefusal, Hold, ToCore};
use crate::actors::{ApplyOutput, CheckTaskInstruction, SubmitMessages, SyncStateActor};
use crate::ids::AgentId;
use crate::monitor::Monitor;
use actix::Addr;
use async_nats::Subject;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// One agent's calls waiting to be done at most; its node's sender waits beyond it.
const PER_AGENT: usize = 1024;
/// How long a `Stored` call waits for the journal.
const STORE_DEADLINE: Duration = Duration::from_secs(30);

/// The hold each agent placed on another node runs under now, as the team's node granted it.
#[derive(Default)]
pub struct Grants(Mutex<HashMap<AgentId, Hold>>);

impl Grants {
    pub fn set(&self, agent: AgentId, hold: Hold) {
        self.lock().insert(agent, hold);
    }

    /// The agent runs on no other node (it is back on this one, or moving).
    pub fn clear(&self, agent: &AgentId) {
        self.lock().remove(agent);
    }

    pub fn get(&self, agent: &AgentId) -> Option<Hold> {
        self.lock().get(agent).copied()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Hold>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the calls are done with.
#[derive(Clone)]
struct Team {
    client: async_nats::Client,
    monitor: Monitor,
    sync: Addr<SyncStateActor>,
    grants: Arc<Grants>,
}

/// The team's node taking calls; it stops taking them when dropped.
pub struct CoreCalls {
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl CoreCalls {
    /// Takes the calls of the team's agents on other nodes, until dropped.
    pub async fn start(
        bus: &Arc<Bus>,
        monitor: Monitor,
        sync: Addr<SyncStateActor>,
        grants: Arc<Grants>,
    ) -> Result<CoreCalls, LinkError> {
        let mut calls = bus
            .client
            .subscribe(bus.names.core_subject.clone())
            .await
            .map_err(|e| LinkError::Start(e.to_string()))?;
        let team = Team {
            client: bus.client.clone(),
            monitor,
            sync,
            grants,
        };
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let serve = async move {
            let mut agents: HashMap<AgentId, mpsc::Sender<(ToCore, Option<Subject>)>> =
                HashMap::new();
            loop {
                let m = tokio::select! {
                    m = calls.next() => match m { Some(m) => m, None => return },
                    _ = &mut stopped => return,
                };
                let call: ToCore = match serde_json::from_slice(&m.payload) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!("a call from another node could not be read: {e}");
                        continue;
                    }
                };
                let queue = agents.entry(call.agent.clone()).or_insert_with(|| {
                    let (tx, rx) = mpsc::channel(PER_AGENT);
                    tokio::spawn(one_agent(team.clone(), rx));
                    tx
                });
                if queue.send((call, m.reply)).await.is_err() {
                    tracing::warn!("an agent's calls stopped being taken");
                }
            }
        };
        std::thread::Builder::new()
            .name("cohort-core-calls".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt.block_on(serve),
                    Err(e) => {
                        tracing::error!("the calls of agents on other nodes cannot be taken: {e}")
                    }
                }
            })
            .map_err(|e| LinkError::Start(e.to_string()))?;
        Ok(CoreCalls { _stop: stop })
    }
}

/// Does one agent's calls in order.
async fn one_agent(team: Team, mut calls: mpsc::Receiver<(ToCore, Option<Subject>)>) {
    while let Some((call, reply)) = calls.recv().await {
        let answer = team.answer(call).await;
        if let (Some(reply), Some(answer)) = (reply, answer) {
            match serde_json::to_vec(&answer) {
                Ok(json) => {
                    if let Err(e) = team.client.publish(reply, json.into()).await {
                        tracing::warn!("an answer to another node was not sent: {e}");
                    }
                }
                Err(e) => tracing::error!("an answer did not serialise: {e}"),
            }
        }
    }
}

impl Team {
    /// Does `call`; its answer, unless it wants none.
    async fn answer(&self, ToCore { agent, hold, call }: ToCore) -> Option<CoreAnswer> {
        if self.grants.get(&agent) != Some(hold) {
            tracing::debug!(%agent, ?hold, now = ?self.grants.get(&agent), "a call under a hold that is not the agent's now was refused");
            // A glimpse of an answer being written needs no answer, even a refusal.
            return (!matches!(call, CoreCall::Writing { .. }))
                .then_some(Err(CoreRefusal::NotHeld(agent)));
        }
        let unreachable = |e: actix::MailboxError| CoreRefusal::Unavailable(e.to_string());
        Some(match call {
            CoreCall::Publish { changes } => {
                self.monitor.publish(changes);
                return None;
            }
            CoreCall::Writing { step, text } => {
                self.monitor.writing(&agent, &step, &text);
                return None;
            }
            CoreCall::Apply {
                output,
                held,
                settle,
            } => self
                .sync
                .send(ApplyOutput {
                    output: *output,
                    held,
                    settle: settle.map(|s| *s),
                })
                .await
                .map_err(unreachable)
                .and_then(|r| r.map_err(CoreRefusal::Sync)),
            CoreCall::Submit { messages, held } => self
                .sync
                .send(SubmitMessages { messages, held })
                .await
                .map_err(unreachable)
                .and_then(|r| r.map_err(CoreRefusal::Sync)),
            CoreCall::Check { instruction } => self
                .sync
                .send(CheckTaskInstruction { agent, instruction })
                .await
                .map_err(unreachable)
                .and_then(|r| r.map_err(CoreRefusal::Sync)),
            CoreCall::Stored => {
                let version = self.monitor.assigned_version();
                match tokio::time::timeout(STORE_DEADLINE, self.monitor.durable(version)).await {
                    Ok(true) => Ok(()),
                    _ => Err(CoreRefusal::NotStored),
                }
            }
        })
    }
}
