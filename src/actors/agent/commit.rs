//! The agent actor's commits outside a step's end: messages it sends, and the runtime's closing
//! of work in a manager's place (after a manager's second try at a notice failed or was refused
//! too, `agent::FollowUp::Close` goes to SyncState as that manager's instruction).

use super::AgentActor;
use crate::actors::sync_state::{ApplyOutput, SubmitMessages};
use crate::message::{ExecuteOutput, Message, TaskInstruction};
use crate::sync::SyncError;
use actix::prelude::*;

impl AgentActor {
    /// The runtime's closing of work this manager could not act on twice (see
    /// `agent::FollowUp`): handed to SyncState as the manager's instruction, with the agent's
    /// changes so far (the step's result records it).
    pub(super) fn close_in_place(&mut self, closing: TaskInstruction, ctx: &mut Context<Self>) {
        tracing::warn!(agent = %self.state.agent_id, action = closing.action(), "the manager's second try could not be carried out; the runtime closes the work in its place");
        let output = ExecuteOutput {
            agent_id: Some(self.state.agent_id.clone()),
            // The runtime closes the task the refused step was about (never an add_task).
            task_id: Some(closing.task().clone()),
            task_instruction: Some(closing),
            ..Default::default()
        };
        let held = self.hand_over();
        ctx.spawn(
            self.sync
                .send(ApplyOutput {
                    output,
                    held,
                    settle: None,
                })
                .into_actor(self)
                .map(|res, act, ctx| act.committed(res, "the runtime's closing", ctx)),
        );
    }

    /// Sends messages with the agent's changes so far, stored in one commit.
    pub(super) fn submit_with_changes(&mut self, messages: Vec<Message>, ctx: &mut Context<Self>) {
        let held = self.hand_over();
        ctx.spawn(
            self.sync
                .send(SubmitMessages { messages, held })
                .into_actor(self)
                .map(|res, act, ctx| act.committed(res, "a message this agent sent", ctx)),
        );
    }

    /// A commit handed over came back (`what` it carried): the agent holds nothing for it any
    /// more and goes on.
    fn committed(
        &mut self,
        res: Result<Result<(), SyncError>, MailboxError>,
        what: &str,
        ctx: &mut Context<Self>,
    ) {
        self.holding -= 1;
        if let Ok(Err(e)) = res {
            tracing::warn!(agent = %self.state.agent_id, "SyncState refused {what}: {e}");
        }
        self.try_run(ctx);
    }
}
