//! A message delivered to the agent (`Deliver`): acknowledged in the same commit as what it
//! made of the agent; a human agent records it for its person, an agent with a model takes it
//! into its queue (steps it dropped give their waiting senders' wait ids back), lets go of a
//! call whose work it ended, and goes on. A message it was sent again (while it moved between
//! nodes of the team, the record's copy and the one on its way may both reach it) is taken
//! once.

use super::AgentActor;
use super::messages::Deliver;
use actix::prelude::*;
use cohort_core::message::Message;
use cohort_core::step::{receive_as_human, receive_message, release_for};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// How many message numbers an agent remembers having taken.
const TAKEN_KEPT: usize = 4096;

/// The message numbers the agent took lately (bounded: the oldest go first).
#[derive(Default)]
pub(super) struct Taken {
    order: VecDeque<u64>,
    set: HashSet<u64>,
}

impl Taken {
    /// Whether message `no` is new to the agent (0, untracked, always is); remembers it.
    fn first(&mut self, no: u64) -> bool {
        if no == 0 {
            return true;
        }
        if !self.set.insert(no) {
            return false;
        }
        self.order.push_back(no);
        if self.order.len() > TAKEN_KEPT
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }
}

impl Handler<Deliver> for AgentActor {
    type Result = ();
    fn handle(&mut self, Deliver(no, m): Deliver, ctx: &mut Context<Self>) {
        if self.taken.first(no) {
            self.take_in_turn(no, m, ctx);
        }
    }
}

impl AgentActor {
    /// Takes message `no`, new to the agent: counted, recorded as received, and made steps of
    /// (or kept for its person).
    pub(super) fn take(&mut self, no: u64, m: Arc<Message>, ctx: &mut Context<Self>) {
        self.intake.took_one();
        self.turns.took_message();
        // The receipt goes out with what the message made of this agent, in one commit.
        self.state.note_received(no);
        if self.state.human_config.is_some() {
            let now = cohort_core::clock::local_timestamp();
            let now_ms = cohort_core::clock::Now::current().unix_ms;
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_message_sent_again_is_taken_once_and_the_memory_stays_bounded() {
        let mut taken = super::Taken::default();
        assert!(taken.first(7) && !taken.first(7));
        assert!(
            taken.first(0) && taken.first(0),
            "untracked messages are always new"
        );
        for no in 8..8 + super::TAKEN_KEPT as u64 {
            assert!(taken.first(no));
        }
        assert_eq!(taken.order.len(), super::TAKEN_KEPT);
        assert!(taken.first(7), "the oldest number was forgotten");
    }
}
