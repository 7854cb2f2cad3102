//! Where the agent's changes go: published to the monitor at once, or handed to SyncState by
//! `commit`, stored with what it applies there (a step's output, messages the agent sends).
//! Hand-overs go one at a time, in the order they were made, and while one is unanswered the
//! agent publishes nothing, so its changes stay in order.
//! Also the commits outside a step's end: messages it sends, and the runtime's closing of work
//! in a manager's place (after a manager's second try at a notice failed or was refused too,
//! `step::FollowUp::Close` goes to SyncState as that manager's instruction).

use super::AgentActor;
use crate::actors::sync_state::{ApplyOutput, CheckTaskInstruction, SubmitMessages};
use actix::prelude::*;
use cohort_core::message::{ExecuteOutput, Message, TaskInstruction};
use cohort_core::step::Settle;
use cohort_core::team::SyncError;
use futures::channel::oneshot;
use futures::future::Either;

/// The agent's way to SyncState (the owner of tasks and stages): what it hands over, and the
/// instructions it has checked before acting on them.
pub struct SyncLink {
    apply: Recipient<ApplyOutput>,
    submit: Recipient<SubmitMessages>,
    pub(super) check: Recipient<CheckTaskInstruction>,
}

impl SyncLink {
    /// The link to `sync` (the team's SyncState actor).
    pub fn to<A>(sync: &Addr<A>) -> Self
    where
        A: Actor<Context = Context<A>>
            + Handler<ApplyOutput>
            + Handler<SubmitMessages>
            + Handler<CheckTaskInstruction>,
    {
        SyncLink {
            apply: sync.clone().recipient(),
            submit: sync.clone().recipient(),
            check: sync.clone().recipient(),
        }
    }
}

/// How many hand-overs SyncState has not answered yet, and the newest one's answer. A count
/// beside the `Phase`, not in it: hand-overs go out in any phase (a side call's cost while a
/// step runs, a message sent while idle, a verdict stored before its call is made) and several
/// may be unanswered at once. Only `commit` moves it (its fields are private to this file).
#[derive(Default)]
pub(super) struct Unanswered {
    count: u32,
    /// Told once the newest hand-over is answered (or dropped). The next one is sent after
    /// it, so they reach SyncState in the order they were made: actix lets a send that found
    /// SyncState's mailbox full in after a later send that found room (and the agent's output
    /// and its messages go through two senders), which could store a step's end before the
    /// hand-over that added the step.
    newest: Option<oneshot::Receiver<()>>,
}

impl Unanswered {
    /// Whether every hand-over has been answered.
    pub(super) fn none(&self) -> bool {
        self.count == 0
    }

    /// Counts a hand-over made now: the one made before it, if that one is not answered yet
    /// (this one goes once it is), and what this one tells once it is answered (dropped
    /// untold, it lets the next go too).
    fn after_the_one_before(&mut self) -> (Option<oneshot::Receiver<()>>, oneshot::Sender<()>) {
        self.count += 1;
        let (answered, next) = oneshot::channel::<()>();
        let before = self
            .newest
            .replace(next)
            .and_then(|mut b| matches!(b.try_recv(), Ok(None)).then_some(b));
        (before, answered)
    }
}

/// What the agent hands over to SyncState with its changes. Built to be sent at once, never
/// kept: the size of the output variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Handover {
    /// A step's output (or one made in a step's place), with how the step closes if it does.
    Output(ExecuteOutput, Option<Settle>),
    /// Messages the agent sends (none: its changes alone).
    Messages(Vec<Message>),
}

/// SyncState's answer to a hand-over: stored (or refused), or SyncState could not be reached.
pub(super) type Answer = Result<Result<(), SyncError>, MailboxError>;

impl AgentActor {
    /// Hands `what` to SyncState with the agent's changes since it last published, to be
    /// stored in one commit; the agent holds its later changes until SyncState answered. The
    /// future resolves to SyncState's answer (the hand-over is counted as answered by then).
    pub(super) fn commit(
        &mut self,
        what: Handover,
    ) -> impl ActorFuture<Self, Output = Answer> + use<> {
        self.state.refresh_working_state();
        let held = self.state.take_changes();
        let (before, answered) = self.unanswered.after_the_one_before();
        let (apply, submit) = (self.sync.apply.clone(), self.sync.submit.clone());
        let send = move || match what {
            Handover::Output(output, settle) => Either::Left(apply.send(ApplyOutput {
                output,
                held,
                settle,
                writer: None,
            })),
            Handover::Messages(messages) => Either::Right(submit.send(SubmitMessages {
                messages,
                held,
                writer: None,
            })),
        };
        // Sent now (into SyncState's mailbox before this handler ends, as a caller expects),
        // unless the one before is still unanswered.
        let request = match before {
            None => Either::Left(send()),
            Some(before) => Either::Right((before, send)),
        };
        let sent = async move {
            let request = match request {
                Either::Left(request) => request,
                Either::Right((before, send)) => {
                    let _ = before.await;
                    send()
                }
            };
            let answer = request.await;
            let _ = answered.send(());
            answer
        };
        sent.into_actor(self).map(|answer, act, _| {
            act.unanswered.count -= 1;
            answer
        })
    }

    /// Publishes the changes this agent made to itself since it last published (held while a
    /// hand-over is unanswered: they go out with the next one, or once it is answered).
    pub(super) fn publish(&mut self) {
        if self.unanswered.count > 0 {
            return;
        }
        self.state.refresh_working_state();
        self.outlet.publish(self.state.take_changes());
    }

    /// The runtime's closing of work this manager could not act on twice (see
    /// `step::FollowUp`): handed to SyncState as the manager's instruction, with the agent's
    /// changes so far (the step's result records it).
    pub(super) fn close_in_place(&mut self, closing: TaskInstruction, ctx: &mut Context<Self>) {
        tracing::warn!(agent = %self.state.agent_id, action = closing.action(), "the manager's second try could not be carried out; the runtime closes the work in its place");
        let output = ExecuteOutput {
            agent_id: Some(self.state.agent_id.clone()),
            // The runtime closes the task the refused step was about (never an add_task).
            task_id: Some(closing.task().clone()),
            task_instruction: Some(closing),
            repairs: vec![cohort_core::policy::Repair::RuntimeClosing],
            ..Default::default()
        };
        let commit = self.commit(Handover::Output(output, None));
        ctx.spawn(commit.map(|res, act, ctx| act.committed(res, "the runtime's closing", ctx)));
    }

    /// Sends messages with the agent's changes so far, stored in one commit.
    pub(super) fn submit_with_changes(&mut self, messages: Vec<Message>, ctx: &mut Context<Self>) {
        let commit = self.commit(Handover::Messages(messages));
        ctx.spawn(commit.map(|res, act, ctx| act.committed(res, "a message this agent sent", ctx)));
    }

    /// A commit came back (`what` it carried): the agent goes on.
    pub(super) fn committed(&mut self, res: Answer, what: &str, ctx: &mut Context<Self>) {
        if let Ok(Err(e)) = res {
            tracing::warn!(agent = %self.state.agent_id, "SyncState refused {what}: {e}");
        }
        self.try_run(ctx);
    }
}
