//! The agent actor as a person's agent: what the person sends goes out as this human agent,
//! stored together with the person's side of it (a question marked answered).

use super::{AgentActor, LOOSE_HISTORY_KEPT};
use crate::actors::SubmitMessages;
use crate::agent::{HumanError, HumanMessage, human_send};
use crate::message::Message;
use actix::prelude::*;

/// A person's message, sent as this human agent (one message per receiver, each answering
/// that receiver's pending wait). Answered with the messages sent, or why nothing was sent.
#[derive(Message)]
#[rtype(result = "Result<Vec<Message>, SendRefused>")]
pub struct HumanSend(pub HumanMessage);

/// Why a person's message did not go out.
#[derive(Debug, thiserror::Error)]
pub enum SendRefused {
    /// It is not a message this person may send (see `HumanError`).
    #[error(transparent)]
    Human(#[from] HumanError),
    /// SyncState refused it.
    #[error(transparent)]
    Refused(crate::sync::SyncError),
    /// The team is not running.
    #[error("the team is not running: {0}")]
    NotRunning(String),
}

impl Handler<HumanSend> for AgentActor {
    type Result = ResponseActFuture<Self, Result<Vec<Message>, SendRefused>>;
    fn handle(&mut self, HumanSend(m): HumanSend, ctx: &mut Context<Self>) -> Self::Result {
        let sent = match human_send(&mut self.state, &m, &crate::clock::Now::current()) {
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
        let held = self.hand_over();
        let submit = self.sync.send(SubmitMessages {
            messages: sent.clone(),
            held,
        });
        Box::pin(submit.into_actor(self).map(move |res, act, _| {
            act.holding -= 1;
            act.publish();
            match res {
                Ok(Ok(())) => Ok(sent),
                Ok(Err(e)) => Err(SendRefused::Refused(e)),
                Err(e) => Err(SendRefused::NotRunning(e.to_string())),
            }
        }))
    }
}
