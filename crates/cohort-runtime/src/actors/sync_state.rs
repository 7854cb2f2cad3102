//! The SyncState actor: the only writer of tasks and stages. It applies executed steps'
//! outputs with the pure `SyncCore` and publishes, in one commit, the agent's changes that came
//! with the output, the changes the output makes, the step's closing and the messages it
//! sends (numbered, recorded in their task's conversation). It asks the supervisor to start
//! the agents a manager hired, then routes the messages, and answers ask_info queries.

use super::dispatcher::{Dispatcher, Route};
use super::supervisor::Hire;
use crate::monitor::{Effect, Monitor};
use actix::prelude::*;
use cohort_core::event::Change;
use cohort_core::ids::TaskId;
use cohort_core::message::{ExecuteOutput, Message};
use cohort_core::step::Settle;
use cohort_core::team::{Applied, SyncCore, SyncError};
use cohort_store::lease::AgentWrite;

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

    /// Publishes `held` (an agent's own changes) and what SyncCore decided in one commit, then
    /// routes the messages once it is stored: a receiver never acts on a message whose sending
    /// step a restart would lose. Without a store they go at once. The commit is refused unless
    /// `writer` (the agent's lease, for one on another node) still holds.
    fn effect(
        &mut self,
        mut applied: Applied,
        (held, writer): (Vec<Change>, Option<AgentWrite>),
        ctx: &mut Context<Self>,
    ) {
        let mut changes = held;
        changes.append(&mut applied.changes);
        let out = self.record_sent(&mut applied, &mut changes);
        let hires = std::mem::take(&mut applied.new_agents);
        let hiring = match (&self.hiring, hires.is_empty()) {
            (Some(h), false) => h.clone(),
            (None, false) => {
                tracing::error!("a hire was accepted, but this team has no supervisor");
                self.publish_routing(changes, out, writer);
                return;
            }
            (_, true) => {
                self.publish_routing(changes, out, writer);
                return;
            }
        };
        // New agents first: SyncState takes no other message until the supervisor has started
        // them and registered them with the dispatcher, so whatever is routed next, here or
        // later, can already reach them. Their addition is stored with the hire, in one commit.
        let started = async move {
            let mut added = Vec::new();
            for m in hires {
                let id = m.id.clone();
                match hiring.send(Hire(m)).await {
                    Ok(Ok(change)) => added.push(change),
                    Ok(Err(e)) => tracing::error!(agent = %id, "hire failed: {e}"),
                    Err(e) => tracing::error!(agent = %id, "hire failed: {e}"),
                }
            }
            added
        };
        ctx.wait(started.into_actor(self).map(move |added, act, _| {
            changes.extend(added);
            act.publish_routing(changes, out, writer);
        }));
    }

    /// Publishes `changes` and routes `out` through the dispatcher once they are stored.
    fn publish_routing(&self, changes: Vec<Change>, out: Vec<Route>, writer: Option<AgentWrite>) {
        let dispatcher = self.dispatcher.clone();
        let route: Option<Effect> = (!out.is_empty()).then(|| {
            Box::new(move || {
                for r in out {
                    dispatcher.do_send(r);
                }
            }) as Effect
        });
        self.monitor.publish_as(writer, changes, route);
    }

    /// Numbers the output's messages (and ask_info answers) and records them in their tasks'
    /// conversations; returns them for routing.
    fn record_sent(&mut self, applied: &mut Applied, changes: &mut Vec<Change>) -> Vec<Route> {
        let mut out = std::mem::take(&mut applied.messages);
        for (asker, q) in &applied.queries {
            let monitor = &self.monitor;
            out.push(
                self.core
                    .answer(asker, q, &|id| agent_with_steps(monitor, id)),
            );
        }
        let now = now();
        out.into_iter()
            .map(|m| {
                let (no, m, recorded) = self.core.record_sent(m, &now);
                changes.extend(recorded);
                Route {
                    message_no: no,
                    message: m,
                    to: None,
                }
            })
            .collect()
    }
}

/// An agent's published state with its steps (the state lists them by id) under `steps`.
fn agent_with_steps(
    monitor: &Monitor,
    id: &cohort_core::ids::AgentId,
) -> Option<serde_json::Value> {
    monitor.read(|s| {
        let agent = s.agents.get(id)?;
        let mut v = serde_json::to_value(agent).ok()?;
        v["steps"] = serde_json::to_value(agent.agent_step.steps()).ok()?;
        Some(v)
    })
}

fn now() -> String {
    cohort_core::clock::local_timestamp()
}

impl Actor for SyncStateActor {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Context<Self>) {
        self.monitor.publish(self.core.initial_changes());
    }
}

/// An executed step's output, with the agent's changes since it last published and how the
/// step closes; all are stored in one commit. Answered with SyncState's refusal if it refused
/// the output.
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct ApplyOutput {
    pub output: ExecuteOutput,
    pub held: Vec<Change>,
    pub settle: Option<Settle>,
    /// The agent's lease it was handed over under, when it runs on another node.
    pub writer: Option<AgentWrite>,
}

/// Answered once SyncState has published everything it took before (a hire defers its
/// publishing past the answer to the output that made it): what the placer waits for before
/// it reads an agent's record to move it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AllPublished;

impl Handler<AllPublished> for SyncStateActor {
    type Result = ();
    fn handle(&mut self, _: AllPublished, _: &mut Context<Self>) {}
}

/// The watchdog found `task` with nobody working in it for `idle_secs`: its goal-giver is told
/// (once; see `SyncCore::report_stall`).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReportStall {
    pub task_id: TaskId,
    pub idle_secs: u64,
}

/// A message from outside the agents' steps (the operator's goal, a wait id returned).
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct SubmitMessage(pub Message);

/// Messages (a person's, or wait ids an agent returns) with the changes the agent made with
/// them, stored in one commit (the changes even when a message is refused: the agent has
/// made them). All are sent, or none; answered with the first refusal.
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct SubmitMessages {
    pub messages: Vec<Message>,
    pub held: Vec<Change>,
    /// The agent's lease it was handed over under, when it runs on another node.
    pub writer: Option<AgentWrite>,
}

impl Handler<ApplyOutput> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, msg: ApplyOutput, ctx: &mut Context<Self>) -> Self::Result {
        let mut applied = self.core.apply(&msg.output, &now());
        let refused = applied.refused.take();
        if let Some(settle) = &msg.settle {
            let failure = settle.outcome(refused.as_ref(), self.core.texts());
            applied.changes.extend(settle.changes(failure.as_deref()));
            // Whoever waited for this step's reply gets its wait id back.
            if let Some(m) = failure.as_deref().and_then(|f| settle.release(f)) {
                match self.core.submit(m) {
                    Ok(mut a) => applied.messages.append(&mut a.messages),
                    Err(e) => tracing::warn!("could not return a wait id: {e}"),
                }
            }
        }
        self.effect(applied, (msg.held, msg.writer), ctx);
        refused.map_or(Ok(()), Err)
    }
}

/// A person cancels a task (see `SyncCore::cancel_task`).
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct CancelTask {
    pub task_id: cohort_core::ids::TaskId,
    pub by: cohort_core::ids::AgentId,
    pub reason: String,
}

impl Handler<CancelTask> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, c: CancelTask, ctx: &mut Context<Self>) -> Self::Result {
        let applied = self.core.cancel_task(&c.task_id, &c.by, &c.reason)?;
        tracing::info!(task = %c.task_id, by = %c.by, "task cancelled");
        self.effect(applied, (Vec::new(), None), ctx);
        Ok(())
    }
}

/// Whether an agent may give this task instruction now (see
/// `SyncCore::check_task_instruction`); nothing is applied.
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct CheckTaskInstruction {
    pub agent: cohort_core::ids::AgentId,
    pub instruction: cohort_core::message::TaskInstruction,
}

impl Handler<CheckTaskInstruction> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, c: CheckTaskInstruction, _: &mut Context<Self>) -> Self::Result {
        self.core.check_task_instruction(&c.agent, &c.instruction)
    }
}

/// Whether a person's message of this many bytes fits beside the open work now (see
/// `SyncCore::room_for_person`): asked before the person's side of a send is recorded.
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct CheckRoom(pub usize);

impl Handler<CheckRoom> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, CheckRoom(bytes): CheckRoom, _: &mut Context<Self>) -> Self::Result {
        self.core.room_for_person(bytes)
    }
}

/// A person cancels a stage (see `SyncCore::cancel_stage`).
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct CancelStage {
    pub task_id: cohort_core::ids::TaskId,
    pub stage_id: cohort_core::ids::StageId,
    pub by: cohort_core::ids::AgentId,
    pub reason: String,
}

impl Handler<CancelStage> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, c: CancelStage, ctx: &mut Context<Self>) -> Self::Result {
        let applied = self
            .core
            .cancel_stage(&c.task_id, &c.stage_id, &c.by, &c.reason)?;
        self.effect(applied, (Vec::new(), None), ctx);
        Ok(())
    }
}

/// A person pauses (or resumes) a task (see `SyncCore::pause_task`).
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct PauseTask {
    pub task_id: cohort_core::ids::TaskId,
    pub by: cohort_core::ids::AgentId,
    pub paused: bool,
}

impl Handler<PauseTask> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, p: PauseTask, ctx: &mut Context<Self>) -> Self::Result {
        let applied = self.core.pause_task(&p.task_id, &p.by, p.paused)?;
        self.effect(applied, (Vec::new(), None), ctx);
        Ok(())
    }
}

/// A task is marked as forked from a recorded one (see `SyncCore::mark_forked`).
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct MarkForked {
    pub task_id: cohort_core::ids::TaskId,
    pub from: cohort_core::state::ForkedFrom,
}

impl Handler<MarkForked> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, m: MarkForked, ctx: &mut Context<Self>) -> Self::Result {
        let applied = self.core.mark_forked(&m.task_id, m.from)?;
        self.effect(applied, (Vec::new(), None), ctx);
        Ok(())
    }
}

/// A person retries a task's running stage (see `SyncCore::operator_retry_stage`).
#[derive(Message)]
#[rtype(result = "Result<(), SyncError>")]
pub struct RetryStage {
    pub task_id: cohort_core::ids::TaskId,
    pub stage_id: cohort_core::ids::StageId,
    pub by: cohort_core::ids::AgentId,
}

impl Handler<RetryStage> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, r: RetryStage, ctx: &mut Context<Self>) -> Self::Result {
        let applied = self
            .core
            .operator_retry_stage(&r.task_id, &r.stage_id, &r.by)?;
        self.effect(applied, (Vec::new(), None), ctx);
        Ok(())
    }
}

impl Handler<ReportStall> for SyncStateActor {
    type Result = ();
    fn handle(&mut self, r: ReportStall, ctx: &mut Context<Self>) {
        let applied = self.core.report_stall(&r.task_id, r.idle_secs);
        if !applied.messages.is_empty() {
            tracing::info!(task = %r.task_id, idle_secs = r.idle_secs, "a task stalled: its goal-giver is told");
            self.effect(applied, (Vec::new(), None), ctx);
        }
    }
}

impl Handler<SubmitMessage> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, SubmitMessage(m): SubmitMessage, ctx: &mut Context<Self>) -> Self::Result {
        let applied = self.core.submit(m)?;
        self.effect(applied, (Vec::new(), None), ctx);
        Ok(())
    }
}

impl Handler<SubmitMessages> for SyncStateActor {
    type Result = Result<(), SyncError>;
    fn handle(&mut self, msg: SubmitMessages, ctx: &mut Context<Self>) -> Self::Result {
        // All or none: a person told of a refusal may send again, and must not send twice
        // what already went.
        let mut applied = Applied::default();
        let mut refused = None;
        for m in msg.messages {
            match self.core.submit(m) {
                Ok(mut a) => applied.messages.append(&mut a.messages),
                Err(e) => {
                    refused.get_or_insert(e);
                }
            }
        }
        if refused.is_some() {
            applied.messages.clear();
        }
        self.effect(applied, (msg.held, msg.writer), ctx);
        refused.map_or(Ok(()), Err)
    }
}
