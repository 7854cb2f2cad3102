//! An agent's stand-in on the team's node while the agent runs on another node: registered
//! with the dispatcher in the agent's place, it passes on what the agent is sent (messages, a
//! person's verdicts, cancels, pauses) as [`ToHost`] calls to that node.
//!
//! Messages go one at a time, in the order they were routed, each once its predecessor was
//! taken (one in flight per agent); one that found no answer is sent again. One the node says
//! it no longer runs the agent for is left in flight: the team's record still has it, and
//! it is delivered again wherever the agent runs next; the agent is noted [`Lost`], so the
//! placer runs it again (that node restarted, or let it go). So is an agent whose node took no
//! message for [`UNREACHABLE_AFTER`] (cut off from NATS): its old copy's writes are refused by
//! its stale lease.

use super::link::Link;
use super::wire::{Hold, HostAnswer, HostRefusal, ToHost};
use crate::actors::{CancelStep, Decide, Deliver, SetPaused};
use actix::prelude::*;
use cohort_core::ids::AgentId;
use cohort_core::message::Message;
use cohort_core::step::approval::VerdictError;
use cohort_core::step::cancel::CancelError;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a call to the agent's node waits for its answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(10);
/// How long a message that found no answer waits before it is sent again.
const RESEND_AFTER: Duration = Duration::from_millis(500);
/// Messages waiting to be passed on at most; beyond it they stay in flight in the record.
const QUEUED: usize = 100_000;
/// How long the agent's node may go without taking a message before the agent counts as lost
/// there (cut off from NATS while it still says it is alive in the store): it is placed again,
/// and whatever the old copy still tries is refused by its stale lease.
const UNREACHABLE_AFTER: Duration = Duration::from_secs(10);

/// The agents whose node said it no longer runs them (under the hold they were placed with),
/// though no move was made: that node restarted, or let them go when they lost their way to
/// the team's node. The placer places them again from the record.
#[derive(Default)]
pub struct Lost(Mutex<HashMap<AgentId, Hold>>);

impl Lost {
    fn note(&self, agent: AgentId, hold: Hold) {
        self.lock().insert(agent, hold);
    }

    /// Whether `agent`, placed under `hold`, was lost (forgotten once asked).
    pub fn take(&self, agent: &AgentId, hold: Hold) -> bool {
        let mut lost = self.lock();
        match lost.get(agent) {
            Some(h) if *h == hold => {
                lost.remove(agent);
                true
            }
            _ => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Hold>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct StandIn {
    agent: AgentId,
    hold: Hold,
    /// The subject of the node the agent runs on.
    node: String,
    link: Link,
    queue: VecDeque<(u64, Arc<Message>)>,
    sending: bool,
    lost: Arc<Lost>,
    /// Since when the message at the front of the queue has found no answer.
    failing_since: Option<std::time::Instant>,
}

impl StandIn {
    pub fn new(agent: AgentId, hold: Hold, node: String, link: Link, lost: Arc<Lost>) -> Self {
        StandIn {
            agent,
            hold,
            node,
            link,
            queue: VecDeque::new(),
            sending: false,
            lost,
            failing_since: None,
        }
    }

    /// Asks the agent's node, answered with its answer (or why there is none).
    fn ask(&self, call: &ToHost) -> impl Future<Output = HostAnswer> + use<> {
        let payload = serde_json::to_vec(call).unwrap_or_default();
        let asked = self.link.ask(
            self.node.clone(),
            payload.into(),
            call.traceparent(),
            ANSWER_DEADLINE,
        );
        async move {
            let answer = asked
                .await
                .map_err(|e| HostRefusal::Failed(e.to_string()))?;
            serde_json::from_slice::<HostAnswer>(&answer)
                .map_err(|e| HostRefusal::Failed(format!("an unreadable answer: {e}")))?
        }
    }

    /// Passes the oldest waiting message on, unless one is on its way already.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.sending {
            return;
        }
        let Some((no, message)) = self.queue.front().cloned() else {
            return;
        };
        self.sending = true;
        let call = ToHost::Deliver {
            agent: self.agent.clone(),
            hold: self.hold,
            no,
            message: (*message).clone(),
        };
        ctx.spawn(self.ask(&call).into_actor(self).map(|answer, act, ctx| {
            act.sending = false;
            match answer {
                Ok(()) => {
                    act.failing_since = None;
                    act.queue.pop_front();
                    act.pump(ctx);
                }
                Err(HostRefusal::NotHere(_)) => {
                    tracing::warn!(agent = %act.agent, "the agent's node no longer runs it; its messages wait in the record and it is placed again");
                    act.queue.clear();
                    act.lost.note(act.agent.clone(), act.hold);
                }
                Err(e) => {
                    let since = *act.failing_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() >= UNREACHABLE_AFTER {
                        tracing::warn!(agent = %act.agent, "the agent's node took no message for {UNREACHABLE_AFTER:?} ({e}); it is placed again");
                        act.queue.clear();
                        act.lost.note(act.agent.clone(), act.hold);
                        return;
                    }
                    tracing::warn!(agent = %act.agent, "a message to the agent's node found no answer ({e}); sent again");
                    ctx.run_later(RESEND_AFTER, |act, ctx| act.pump(ctx));
                }
            }
        }));
    }
}

impl Actor for StandIn {
    type Context = Context<Self>;
}

impl Handler<Deliver> for StandIn {
    type Result = ();
    fn handle(&mut self, Deliver(no, message): Deliver, ctx: &mut Context<Self>) {
        if self.queue.len() >= QUEUED {
            tracing::warn!(agent = %self.agent, "too many messages wait for the agent's node; this one waits in the record");
            return;
        }
        self.queue.push_back((no, message));
        self.pump(ctx);
    }
}

impl Handler<Decide> for StandIn {
    type Result = ResponseFuture<Result<(), VerdictError>>;
    fn handle(&mut self, d: Decide, _: &mut Context<Self>) -> Self::Result {
        let asked = self.ask(&ToHost::Decide {
            agent: self.agent.clone(),
            hold: self.hold,
            step_id: d.step_id,
            by: d.by,
            verdict: d.verdict,
        });
        Box::pin(async move {
            match asked.await {
                Ok(()) => Ok(()),
                Err(HostRefusal::Verdict(e)) => Err(e),
                Err(e) => Err(VerdictError::Unavailable(e.to_string())),
            }
        })
    }
}

impl Handler<CancelStep> for StandIn {
    type Result = ResponseFuture<Result<(), CancelError>>;
    fn handle(&mut self, c: CancelStep, _: &mut Context<Self>) -> Self::Result {
        let asked = self.ask(&ToHost::Cancel {
            agent: self.agent.clone(),
            hold: self.hold,
            step_id: c.step_id,
            by: c.by,
            reason: c.reason,
        });
        Box::pin(async move {
            match asked.await {
                Ok(()) => Ok(()),
                Err(HostRefusal::Cancel(e)) => Err(e),
                Err(e) => Err(CancelError::Unavailable(e.to_string())),
            }
        })
    }
}

impl Handler<SetPaused> for StandIn {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, SetPaused(paused): SetPaused, _: &mut Context<Self>) -> Self::Result {
        let agent = self.agent.clone();
        let asked = self.ask(&ToHost::Pause {
            agent: agent.clone(),
            hold: self.hold,
            paused,
        });
        Box::pin(async move {
            if let Err(e) = asked.await {
                tracing::warn!(%agent, "the agent's node did not take the pause: {e}");
            }
        })
    }
}
