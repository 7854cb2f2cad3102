//! The agent actor when a person cancels one of its steps: a call in flight for it is
//! abandoned, a wait for a person's verdict on it ends, and the step closes `cancelled`
//! through SyncState like any step's end (see `agent::cancel`).

use super::AgentActor;
use crate::agent::cancel::{CancelError, cancel_step, check_cancel, mark_cancelled};
use crate::agent::release_for;
use crate::ids::{AgentId, StepId};
use crate::state::StepExecutionState;
use actix::prelude::*;

/// A person cancels step `step_id` of this agent, with an optional reason.
#[derive(Message)]
#[rtype(result = "Result<(), CancelError>")]
pub struct CancelStep {
    pub step_id: StepId,
    pub by: AgentId,
    pub reason: String,
}

impl Handler<CancelStep> for AgentActor {
    type Result = Result<(), CancelError>;
    fn handle(&mut self, c: CancelStep, ctx: &mut Context<Self>) -> Self::Result {
        let id = c.step_id;
        check_cancel(&self.state, &id)?;
        if self.settling.as_ref() == Some(&id) {
            return Err(CancelError::Ending(id));
        }
        tracing::info!(agent = %self.state.agent_id, step = %id, by = %c.by, "a person cancels a step");
        let started = self.state.agent_step.get(&id).is_some_and(|s| {
            s.execution_state == StepExecutionState::Running
                || s.execution_state.waits_for_a_person()
        });
        if self.in_flight.as_ref().is_some_and(|(s, _)| s == &id)
            && let Some((_, handle)) = self.in_flight.take()
        {
            ctx.cancel_future(handle);
        }
        if self.awaiting_approval.as_ref() == Some(&id) {
            self.awaiting_approval = None;
        }
        if started || !self.busy {
            // The agent was on this step, or idle: the step ends as any step does, and the
            // agent goes on from there.
            self.busy = true;
            let completion = cancel_step(&mut self.state, &id, &c.by, &c.reason);
            self.apply_completion(id, completion, ctx);
        } else {
            // Queued behind the step the agent is running: it just leaves the queue (whoever
            // waited for its reply gets their wait id back).
            let why = mark_cancelled(&mut self.state, &id, &c.by, &c.reason);
            let releases: Vec<_> = self
                .state
                .agent_step
                .get(&id)
                .cloned()
                .and_then(|s| release_for(&self.state, &s, &why))
                .into_iter()
                .collect();
            self.submit_with_changes(releases, ctx);
        }
        Ok(())
    }
}
