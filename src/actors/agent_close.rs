//! The agent actor closing work in a manager's place: after a manager's second try at a notice
//! failed or was refused too, the runtime's closing (`agent::FollowUp::Close`) goes to
//! SyncState as that manager's instruction.

use super::AgentActor;
use crate::actors::sync_state::ApplyOutput;
use crate::message::{ExecuteOutput, TaskInstruction};
use actix::prelude::*;

impl AgentActor {
    /// The runtime's closing of work this manager could not act on twice (see
    /// `agent::FollowUp`): handed to SyncState as the manager's instruction, with the agent's
    /// changes so far (the step's result records it).
    pub(super) fn close_in_place(&mut self, closing: TaskInstruction, ctx: &mut Context<Self>) {
        tracing::warn!(agent = %self.state.agent_id, action = closing.action(), "the manager's second try could not be carried out; the runtime closes the work in its place");
        let output = ExecuteOutput {
            agent_id: Some(self.state.agent_id.clone()),
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
                .map(|res, act, ctx| {
                    act.holding -= 1;
                    if let Ok(Err(e)) = res {
                        tracing::warn!(agent = %act.state.agent_id, "SyncState refused the runtime's closing: {e}");
                    }
                    act.try_run(ctx);
                }),
        );
    }
}
