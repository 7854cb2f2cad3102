//! When the agent starts its next step: it runs none, nothing holds it, its step lock is empty
//! (or the step answers a waiting sender) and it is not paused; then how, by the step's
//! executor: a skill's prompt and model call, a tool call, or the native tool loop.

use super::AgentActor;
use super::phase::Phase;
use crate::agent::tool_loop::runs_natively;
use crate::agent::{stop_reason, stop_step};
use crate::state::{Executor, StepState};
use actix::prelude::*;

impl AgentActor {
    /// Starts the next runnable step if the agent may; publishes its changes either way.
    pub(super) fn try_run(&mut self, ctx: &mut Context<Self>) {
        // A graph plan's steps whose dependencies ended are made ready (or end with them).
        crate::agent::dependencies::advance(&mut self.state);
        self.arm_wait_timer(ctx);
        self.check_held(ctx);
        // A reply owed to a waiting sender runs even while this agent waits itself: two agents
        // waiting on each other would otherwise block both for good.
        let may_run = self.state.step_lock.is_empty()
            || self
                .state
                .next_runnable()
                .is_some_and(StepState::answers_a_wait);
        if !matches!(self.phase, Phase::Idle) || !may_run || self.state.paused {
            self.publish();
            return;
        }
        let Some(step) = self.state.start_next() else {
            self.publish();
            return;
        };
        self.phase = Phase::running(step.step_id.clone());
        self.publish();
        if let Some(reason) = stop_reason(&self.state, &step) {
            tracing::warn!(agent = %self.state.agent_id, step = %step.step_id, "{reason}");
            let completion = stop_step(&mut self.state, &step.step_id, reason);
            self.apply_completion(step.step_id, completion, ctx);
            return;
        }
        let skill = match &step.executor {
            Executor::Skill(s) => *s,
            Executor::Tool(server) => {
                let server = server.clone();
                if runs_natively(self.state.native_tools, &step) {
                    self.run_tool_loop(step, server, ctx);
                } else {
                    self.run_tool(step, server, ctx);
                }
                return;
            }
        };
        self.run_skill(step, skill, false, ctx);
    }
}
