//! A message delivered to the agent (`Deliver`): acknowledged in the same commit as what it
//! made of the agent; a human agent records it for its person, an agent with a model takes it
//! into its queue (steps it dropped give their waiting senders' wait ids back), lets go of a
//! call whose work it ended, and goes on.

use super::AgentActor;
use super::messages::Deliver;
use crate::agent::{receive_as_human, receive_message, release_for};
use crate::message::Message;
use actix::prelude::*;

impl Handler<Deliver> for AgentActor {
    type Result = ();
    fn handle(&mut self, Deliver(no, m): Deliver, ctx: &mut Context<Self>) {
        // The receipt goes out with what the message made of this agent, in one commit.
        self.state.note_received(no);
        if self.state.human_config.is_some() {
            let now = crate::clock::local_timestamp();
            let now_ms = crate::clock::Now::current().unix_ms;
            receive_as_human(&mut self.state, &m, &now, now_ms);
            self.publish();
            self.arm_wait_timer(ctx);
            return;
        }
        let received = receive_message(&mut self.state, &m);
        if let Some(p) = received.problem {
            tracing::warn!(agent = %self.state.agent_id, "{p}");
        }
        // Steps the message dropped that owed a waiting sender its reply: the senders get
        // their wait ids back in the same commit as the receipt and the drop.
        let releases: Vec<Message> = received
            .dropped
            .iter()
            .filter_map(|step| {
                release_for(
                    &self.state,
                    step,
                    "its stage or task was finished before it ran",
                )
            })
            .collect();
        if !releases.is_empty() {
            self.submit_with_changes(releases, ctx);
        }
        self.abandon_ended_calls(ctx);
        self.try_run(ctx);
    }
}
