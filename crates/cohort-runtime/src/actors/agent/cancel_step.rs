//! A step ended before its time. A person cancels it (`CancelStep`): a call in flight for it is
//! abandoned, a wait for a person's verdict on it ends, and the step closes `cancelled`
//! through SyncState like any step's end (see `step::cancel`). Or its stage or task ended
//! under its call: the call is abandoned and the step records why.

use super::AgentActor;
use super::messages::CancelStep;
use actix::prelude::*;
use cohort_core::clock::Now;
use cohort_core::ids::StepId;
use cohort_core::state::{Executor, StepExecutionState};
use cohort_core::step::cancel::{CancelError, cancel_step, check_cancel, mark_cancelled};
use cohort_core::step::{Completion, complete_step, complete_tool_step_after, release_for};

impl Handler<CancelStep> for AgentActor {
    type Result = Result<(), CancelError>;
    fn handle(&mut self, c: CancelStep, ctx: &mut Context<Self>) -> Self::Result {
        let id = c.step_id;
        check_cancel(&self.state, &id)?;
        if self.phase.settling(&id) {
            return Err(CancelError::Ending(id));
        }
        tracing::info!(agent = %self.state.agent_id, step = %id, by = %c.by, "a person cancels a step");
        let started = self.state.agent_step.get(&id).is_some_and(|s| {
            s.execution_state == StepExecutionState::Running
                || s.execution_state.waits_for_a_person()
        });
        if let Some(handle) = self.phase.take_call(&id) {
            ctx.cancel_future(handle);
        }
        self.phase.stop_waiting(&id);
        if started || !self.phase.busy() {
            // The agent was on this step, or idle: the step ends as any step does, and the
            // agent goes on from there.
            let attempts = self.tool_attempts.remove(&id).unwrap_or_default();
            let completion = cancel_step(&mut self.state, &id, &c.by, &c.reason, attempts);
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

impl AgentActor {
    /// A call in flight for a step whose stage or task ended (finished, or cancelled by a
    /// person) is abandoned: its future is dropped, which stops the LLM request or the tool
    /// call, and the step fails saying why.
    pub(super) fn abandon_ended_calls(&mut self, ctx: &mut Context<Self>) {
        for id in self.phase.calling() {
            self.abandon_if_ended(id, ctx);
        }
    }

    fn abandon_if_ended(&mut self, id: StepId, ctx: &mut Context<Self>) {
        let Some(step) = self.state.agent_step.get(&id) else {
            return;
        };
        if self.state.holds(&step.task_id, &step.stage_id) {
            return;
        }
        let is_tool = matches!(step.executor, Executor::Tool(_));
        let Some(handle) = self.phase.take_call(&id) else {
            return;
        };
        ctx.cancel_future(handle);
        tracing::info!(agent = %self.state.agent_id, step = %id, "abandoned a call whose work ended");
        // The step no longer belongs to live work, so completing it only records why it ended.
        let why = "abandoned".to_owned();
        let completion = if is_tool {
            let attempts = self.tool_attempts.remove(&id).unwrap_or_default();
            complete_tool_step_after(&mut self.state, &id, Err(why), attempts)
        } else {
            match complete_step(&mut self.state, &id, Err(why), Now::current(), false) {
                Completion::Done(c) => c,
                // Never asked again: `may_ask_again` is false.
                Completion::AskAgain { .. } => return,
            }
        };
        self.apply_completion(id, completion, ctx);
    }
}
