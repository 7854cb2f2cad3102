//! An operator's pause: a paused agent finishes the step it runs, keeps taking messages, and
//! starts no step until resumed (`SetPaused`).

use super::AgentActor;
use super::messages::SetPaused;
use actix::prelude::*;

impl Handler<SetPaused> for AgentActor {
    type Result = ();
    fn handle(&mut self, SetPaused(paused): SetPaused, ctx: &mut Context<Self>) {
        if self.state.set_paused(paused) {
            tracing::info!(agent = %self.state.agent_id, paused, "an operator paused or resumed the agent");
        }
        self.try_run(ctx);
    }
}
