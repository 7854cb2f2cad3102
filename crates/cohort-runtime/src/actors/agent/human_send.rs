//! The agent actor as a person's agent: what the person sends (`HumanSend`) goes out as this
//! human agent, stored together with the person's side of it (a question marked answered).

use super::commit::Handover;
use super::messages::{HumanSend, SendRefused};
use super::{AgentActor, LOOSE_HISTORY_KEPT};
use actix::prelude::*;
use cohort_core::message::Message;
use cohort_core::step::human_send;

impl Handler<HumanSend> for AgentActor {
    type Result = ResponseActFuture<Self, Result<Vec<Message>, SendRefused>>;
    fn handle(&mut self, HumanSend(m): HumanSend, ctx: &mut Context<Self>) -> Self::Result {
        let sent = match human_send(&mut self.state, &m, &cohort_core::clock::Now::current()) {
            Ok(sent) => sent,
            Err(e) => {
                self.publish();
                return Box::pin(async move { Err(e.into()) }.into_actor(self));
            }
        };
        self.state
            .trim_loose_history(&m.task_id, LOOSE_HISTORY_KEPT);
        self.arm_wait_timer(ctx);
        // The person's side of the send (the question marked answered) is stored with the
        // messages themselves, never without them.
        let submit = self.commit(Handover::Messages(sent.clone()));
        Box::pin(submit.map(move |res, act, _| {
            act.publish();
            match res {
                Ok(Ok(())) => Ok(sent),
                Ok(Err(e)) => Err(SendRefused::Refused(e)),
                Err(e) => Err(SendRefused::NotRunning(e.to_string())),
            }
        }))
    }
}
