//! The agent leaving this node for another node of the team (`Retire`): it starts no step more,
//! lets those under way land (their ends stored), publishes what it holds and stops, and
//! answers true. A step held for a person stays held: the agent's next node holds it again.
//! If its steps have not landed by the deadline it stays, works on, and answers false.

use super::AgentActor;
use super::messages::Retire;
use actix::prelude::*;

impl Handler<Retire> for AgentActor {
    type Result = ResponseFuture<bool>;
    fn handle(&mut self, Retire(within): Retire, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if let Some(earlier) = self.retiring.replace(tx) {
            let _ = earlier.send(false);
        }
        ctx.run_later(within, |act, ctx| {
            if let Some(tx) = act.retiring.take() {
                let _ = tx.send(false);
                act.try_run(ctx);
            }
        });
        self.leave_if_quiet(ctx);
        Box::pin(async move { rx.await.unwrap_or(false) })
    }
}

impl AgentActor {
    /// A retiring agent whose steps under way have all landed (or wait for a person) and whose
    /// hand-overs are all answered: it publishes what is left, answers, and stops.
    pub(super) fn leave_if_quiet(&mut self, ctx: &mut Context<Self>) {
        if self.retiring.is_none() || !self.phase.quiet() || !self.unanswered.none() {
            return;
        }
        self.publish();
        if let Some(tx) = self.retiring.take() {
            let _ = tx.send(true);
        }
        ctx.stop();
    }
}
