//! The team's node answering the agents that run on other nodes (the [`ToCore`] calls on the
//! team's core subject): what an agent on this node asks of SyncState and the monitor
//! directly. One agent's calls are done in the order they were sent, each before the next
//! (its hand-over is answered before its next call is looked at); different agents' side by
//! side, on a thread of their own. A call under another hold than the agent's current one is
//! refused: an agent that moved, or whose node was given up for dead, changes nothing. What a
//! call publishes carries the agent's lease token, and the store refuses its commit unless the
//! token is still the lease's: the team's node's memory is not the only fence.

use super::bus::Bus;
use super::link::LinkError;
use super::wire::{CoreAnswer, CoreCall, CoreRefusal, Hold, ToCore};
use crate::actors::{ApplyOutput, CheckTaskInstruction, SubmitMessages, SyncStateActor};
use crate::monitor::Monitor;
use actix::Addr;
use async_nats::Subject;
use cohort_core::ids::AgentId;
use cohort_llm::recorded::CallLog;
use cohort_store::lease::AgentWrite;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// One agent's calls waiting to be done at most; its node's sender waits beyond it.
const PER_AGENT: usize = 1024;
/// How long a `Stored` call waits for the journal.
const STORE_DEADLINE: Duration = Duration::from_secs(30);

/// The hold each agent placed on another node runs under now, as the team's node granted it,
/// and how many of its calls under that hold are being done.
#[derive(Default)]
pub struct Grants {
    held: Mutex<HashMap<AgentId, Granted>>,
    /// Told whenever an agent's last call under way ends.
    done: tokio::sync::Notify,
}

#[derive(Clone, Copy)]
struct Granted {
    /// None once the agent is revoked, while calls begun before still run.
    hold: Option<Hold>,
    under_way: usize,
    /// The newest sequence of its inbox its node said it took under this hold.
    taken: u64,
}

/// A call under way under the agent's current hold; it ends when dropped.
pub struct Doing<'a> {
    grants: &'a Grants,
    agent: AgentId,
}

impl Drop for Doing<'_> {
    fn drop(&mut self) {
        let mut held = self.grants.lock();
        if let Some(g) = held.get_mut(&self.agent) {
            g.under_way -= 1;
            if g.under_way == 0 {
                if g.hold.is_none() {
                    held.remove(&self.agent);
                }
                self.grants.done.notify_waiters();
            }
        }
    }
}

impl Grants {
    pub fn set(&self, agent: AgentId, hold: Hold) {
        let mut held = self.lock();
        let g = held.entry(agent).or_insert(Granted {
            hold: None,
            under_way: 0,
            taken: 0,
        });
        g.hold = Some(hold);
        g.taken = 0;
    }

    /// `agent`'s node took the message at `seq` of its inbox, under `hold`.
    fn took(&self, agent: &AgentId, hold: Hold, seq: u64) {
        if let Some(g) = self.lock().get_mut(agent).filter(|g| g.hold == Some(hold)) {
            g.taken = g.taken.max(seq);
        }
    }

    /// The newest sequence of `agent`'s inbox its node said it took under its hold now.
    pub fn taken(&self, agent: &AgentId) -> u64 {
        self.lock().get(agent).map_or(0, |g| g.taken)
    }

    /// The agent runs on no other node (it is back on this one, or moving): its calls are
    /// refused from now on. Resolves once the calls begun before are done (their changes
    /// published), so nothing it did under the old hold is published after its next node
    /// read the record; at most `within`, false if some were still under way.
    pub async fn revoke(&self, agent: &AgentId, within: Duration) -> bool {
        let drained = async {
            loop {
                let done = self.done.notified();
                {
                    let mut held = self.lock();
                    match held.get_mut(agent) {
                        Some(g) if g.under_way > 0 => g.hold = None,
                        _ => {
                            held.remove(agent);
                            return;
                        }
                    }
                }
                done.await;
            }
        };
        tokio::time::timeout(within, drained).await.is_ok()
    }

    pub fn get(&self, agent: &AgentId) -> Option<Hold> {
        self.lock().get(agent).and_then(|g| g.hold)
    }

    /// Begins a call of `agent`'s under `hold`, unless that is not its hold now.
    fn begin(&self, agent: &AgentId, hold: Hold) -> Option<Doing<'_>> {
        let mut held = self.lock();
        let g = held.get_mut(agent).filter(|g| g.hold == Some(hold))?;
        g.under_way += 1;
        Some(Doing {
            grants: self,
            agent: agent.clone(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Granted>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the calls are done with.
#[derive(Clone)]
struct Team {
    client: async_nats::Client,
    monitor: Monitor,
    calls: Arc<CallLog>,
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
        calls: Arc<CallLog>,
        sync: Addr<SyncStateActor>,
        grants: Arc<Grants>,
    ) -> Result<CoreCalls, LinkError> {
        let mut incoming = bus
            .client
            .subscribe(bus.names.core_subject.clone())
            .await
            .map_err(|e| LinkError::Start(e.to_string()))?;
        let team = Team {
            client: bus.client.clone(),
            monitor,
            calls,
            sync,
            grants,
        };
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let serve = async move {
            let mut agents: HashMap<AgentId, mpsc::Sender<(ToCore, Option<Subject>)>> =
                HashMap::new();
            loop {
                let m = tokio::select! {
                    m = incoming.next() => match m { Some(m) => m, None => return },
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
        let Some(_doing) = self.grants.begin(&agent, hold) else {
            tracing::debug!(%agent, ?hold, now = ?self.grants.get(&agent), "a call under a hold that is not the agent's now was refused");
            // A glimpse of an answer being written or a call ended needs no answer, even a
            // refusal.
            return (!matches!(call, CoreCall::Writing { .. } | CoreCall::Called { .. }))
                .then_some(Err(CoreRefusal::NotHeld(agent)));
        };
        let writer = Some(AgentWrite {
            agent: agent.to_string(),
            token: hold.token,
        });
        let unreachable = |e: actix::MailboxError| CoreRefusal::Unavailable(e.to_string());
        Some(match call {
            CoreCall::Publish { changes } => {
                self.monitor.publish_as(writer, changes, None);
                return None;
            }
            CoreCall::Writing { step, text } => {
                self.monitor.writing(&agent, &step, &text);
                return None;
            }
            CoreCall::Called {
                record,
                model,
                outcome,
            } => {
                // An agent's node speaks for its own agent's calls only.
                if record.agent_id == agent {
                    self.calls.keep(*record, &model, outcome);
                }
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
                    writer,
                })
                .await
                .map_err(unreachable)
                .and_then(|r| r.map_err(CoreRefusal::Sync)),
            CoreCall::Submit { messages, held } => self
                .sync
                .send(SubmitMessages {
                    messages,
                    held,
                    writer,
                })
                .await
                .map_err(unreachable)
                .and_then(|r| r.map_err(CoreRefusal::Sync)),
            CoreCall::Check { instruction } => self
                .sync
                .send(CheckTaskInstruction { agent, instruction })
                .await
                .map_err(unreachable)
                .and_then(|r| r.map_err(CoreRefusal::Sync)),
            CoreCall::Stored { taken } => {
                if let Some(seq) = taken {
                    self.grants.took(&agent, hold, seq);
                }
                let version = self.monitor.assigned_version();
                match tokio::time::timeout(STORE_DEADLINE, self.monitor.durable(version)).await {
                    Ok(true) => Ok(()),
                    _ => Err(CoreRefusal::NotStored),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Hold = Hold { term: 1, token: 7 };

    #[tokio::test]
    async fn a_revoke_refuses_new_calls_at_once_and_waits_for_those_under_way() {
        let grants = Arc::new(Grants::default());
        let agent = AgentId::from("w");
        grants.set(agent.clone(), HOLD);
        assert!(grants.begin(&agent, Hold { term: 1, token: 6 }).is_none());
        let doing = grants.begin(&agent, HOLD).expect("its hold now");

        let (g, a) = (grants.clone(), agent.clone());
        let revoked = tokio::spawn(async move { g.revoke(&a, Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!revoked.is_finished(), "a call is still under way");
        assert!(grants.begin(&agent, HOLD).is_none(), "refused once revoked");
        assert_eq!(grants.get(&agent), None);
        drop(doing);
        assert!(revoked.await.unwrap());
        assert!(grants.lock().is_empty(), "nothing kept of a revoked agent");
    }

    #[tokio::test]
    async fn a_revoke_gives_up_at_its_deadline_and_a_new_grant_is_not_undone() {
        let grants = Grants::default();
        let agent = AgentId::from("w");
        grants.set(agent.clone(), HOLD);
        let doing = grants.begin(&agent, HOLD).unwrap();
        assert!(!grants.revoke(&agent, Duration::from_millis(20)).await);
        let next = Hold { term: 1, token: 8 };
        grants.set(agent.clone(), next);
        drop(doing);
        assert_eq!(grants.get(&agent), Some(next));
        assert!(grants.begin(&agent, next).is_some());
    }
}
