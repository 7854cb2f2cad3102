//! An agent's stand-in on the team's node while the agent runs on another node: registered
//! with the dispatcher in the agent's place, it passes on what the agent is sent (messages, a
//! person's verdicts, cancels, pauses) as [`ToHost`] calls to that node.
//!
//! Messages go into the agent's JetStream inbox ([`inbox`]), in the order they were routed,
//! each once its predecessor is stored there; the agent's node reads them one at a time. An
//! inbox its node has not read from for `UNREACHABLE_AFTER` while messages wait (the node was
//! cut off from NATS, or restarted without the agent) gets the agent noted [`Lost`], so the
//! placer runs it again from the record (which routes the messages again); the old copy's
//! writes are refused by its stale lease.

use super::bus::Bus;
use super::core_calls::Grants;
use super::inbox;
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
/// How long a message the inbox did not take waits before it is put again.
const RESEND_AFTER: Duration = Duration::from_millis(500);
/// How often the stand-in looks at how far the agent's node has read its inbox, while it has
/// not read all of it.
const LOOK_EVERY: Duration = Duration::from_secs(2);
/// Messages waiting to be passed on at most; beyond it they stay in flight in the record.
const QUEUED: usize = 100_000;
/// How long the agent's node may go without reading its inbox, while messages wait there,
/// before the agent counts as lost there (cut off from NATS while it still says it is alive in
/// the store, or restarted without it): it is placed again, and whatever the old copy still
/// tries is refused by its stale lease.
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
    bus: Arc<Bus>,
    queue: VecDeque<(u64, Arc<Message>)>,
    sending: bool,
    lost: Arc<Lost>,
    /// What the agent's node says it took of the inbox (with each receipt it waits for).
    grants: Arc<Grants>,
    /// The newest sequence put into the agent's inbox, and the newest its node took.
    put_to: u64,
    taken_to: u64,
    /// Since when the inbox has held messages its node did not take (no progress).
    stalled_since: Option<std::time::Instant>,
    /// Whether a look at the node's progress is due or under way.
    looking: bool,
}

impl StandIn {
    pub fn new(
        agent: AgentId,
        hold: Hold,
        (node, link, bus): (String, Link, Arc<Bus>),
        (lost, grants): (Arc<Lost>, Arc<Grants>),
    ) -> Self {
        StandIn {
            agent,
            hold,
            node,
            link,
            bus,
            queue: VecDeque::new(),
            sending: false,
            lost,
            grants,
            put_to: 0,
            taken_to: 0,
            stalled_since: None,
            looking: false,
        }
    }

    /// Asks the agent's node, answered with its answer (or why there is none).
    fn ask(&self, call: &ToHost) -> impl Future<Output = HostAnswer> + use<> {
        let payload = serde_json::to_vec(call).unwrap_or_default();
        let asked = self
            .link
            .ask(self.node.clone(), payload.into(), None, ANSWER_DEADLINE);
        async move {
            let answer = asked
                .await
                .map_err(|e| HostRefusal::Failed(e.to_string()))?;
            serde_json::from_slice::<HostAnswer>(&answer)
                .map_err(|e| HostRefusal::Failed(format!("an unreadable answer: {e}")))?
        }
    }

    /// Puts the oldest waiting message into the agent's inbox, unless one is on its way
    /// already.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.sending {
            return;
        }
        let Some((no, message)) = self.queue.front().cloned() else {
            return;
        };
        self.sending = true;
        let (bus, agent, hold) = (self.bus.clone(), self.agent.clone(), self.hold);
        let putting = self
            .bus
            .spawn(async move { inbox::put(&bus, &agent, hold, no, &message).await });
        ctx.spawn(putting.into_actor(self).map(|put, act, ctx| {
            act.sending = false;
            match put {
                Ok(Ok(seq)) => {
                    act.queue.pop_front();
                    act.put_to = seq;
                    act.look_later(ctx);
                    act.pump(ctx);
                }
                Ok(Err(e)) => act.again(ctx, &e),
                Err(e) => act.again(ctx, &e.to_string()),
            }
        }));
    }

    /// Tries the inbox again after [`RESEND_AFTER`].
    fn again(&mut self, ctx: &mut Context<Self>, why: &str) {
        tracing::warn!(agent = %self.agent, "the agent's inbox did not take a message ({why}); tried again");
        ctx.run_later(RESEND_AFTER, |act, ctx| act.pump(ctx));
    }

    /// Looks at how far the agent's node has read its inbox in a while, if it has not read
    /// all of it.
    fn look_later(&mut self, ctx: &mut Context<Self>) {
        if self.looking || self.put_to <= self.taken_to {
            return;
        }
        self.looking = true;
        ctx.run_later(LOOK_EVERY, |act, ctx| act.look(ctx));
    }

    /// The node's progress (the inbox sequence it said it took, with its receipt's `Stored`
    /// call): an inbox it has not read from for [`UNREACHABLE_AFTER`] while messages wait in
    /// it means the node cannot be reached (cut off from NATS, or restarted without the
    /// agent): the agent is noted lost, and placed again.
    fn look(&mut self, ctx: &mut Context<Self>) {
        self.looking = false;
        let now = std::time::Instant::now();
        let taken = self.grants.taken(&self.agent);
        if taken > self.taken_to {
            self.taken_to = taken;
            self.stalled_since = None;
        } else {
            let since = *self.stalled_since.get_or_insert(now);
            if now.duration_since(since) >= UNREACHABLE_AFTER {
                tracing::warn!(agent = %self.agent, "the agent's node read nothing of its inbox for {UNREACHABLE_AFTER:?}; it is placed again");
                self.queue.clear();
                self.lost.note(self.agent.clone(), self.hold);
                return;
            }
        }
        self.look_later(ctx);
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
