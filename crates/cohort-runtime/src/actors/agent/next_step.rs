//! When the agent starts its next step: it runs none (or only ready steps of the same graph
//! plan, up to `step_limits.parallel_steps`), nothing holds it, its step lock is empty (or the
//! step answers a waiting sender) and it is not paused; then how, by the step's executor: a
//! skill's prompt and model call, a tool call, or the native tool loop.

use super::AgentActor;
use actix::prelude::*;
use cohort_core::ids::StepId;
use cohort_core::state::{Executor, StepState};
use cohort_core::step::dependencies::{advance, may_run_beside};
use cohort_core::step::tool_loop::runs_natively;
use cohort_core::step::{stop_reason, stop_step};

impl AgentActor {
    /// Starts the next runnable steps the agent may (one, or a graph plan's ready steps side
    /// by side); publishes its changes either way.
    pub(super) fn try_run(&mut self, ctx: &mut Context<Self>) {
        // A graph plan's steps whose dependencies ended are made ready (or end with them).
        advance(&mut self.state);
        self.arm_wait_timer(ctx);
        self.check_held(ctx);
        while let Some(step) = self.next_to_start(ctx) {
            self.phase.start(step.step_id.clone());
            self.publish();
            self.run_step(step, ctx);
        }
        self.turns.started();
        self.publish();
        self.leave_if_quiet(ctx);
    }

    /// The next step to start now, taken off the queue: the agent is not paused, its step lock
    /// lets it run, and it is free, or runs only steps of the graph plan this one belongs to;
    /// in a replay, its turn has come; and the team's step allowance has a step left, which it
    /// takes.
    fn next_to_start(&mut self, ctx: &mut Context<Self>) -> Option<StepState> {
        // A reply owed to a waiting sender runs even while this agent waits itself: two agents
        // waiting on each other would otherwise block both for good.
        let may_run = self.state.step_lock.is_empty()
            || self
                .state
                .next_runnable()
                .is_some_and(StepState::answers_a_wait);
        if !may_run
            || self.state.paused
            || self.retiring.is_some()
            || !(self.phase.idle() || self.phase.may_add())
        {
            return None;
        }
        let candidate = self.state.next_runnable()?;
        let under_way: Vec<&StepId> = self.phase.steps().collect();
        let beside = may_run_beside(&self.state, candidate, &under_way);
        let asks_model = self.turns.replaying() && self.asks_model(candidate);
        if !beside || !self.step_in_turn(asks_model, ctx) || !self.allowance.take() {
            return None;
        }
        self.state.start_next()
    }

    /// Whether `step`, started now, asks a model (as `run_step` runs it): a skill's step or a
    /// native tool loop, not past a limit, of an agent with a model.
    fn asks_model(&self, step: &StepState) -> bool {
        let by_model = match &step.executor {
            Executor::Skill(_) => true,
            Executor::Tool(_) => runs_natively(self.state.settings.native_tools, step),
        };
        by_model && self.model_for(step).is_some() && stop_reason(&self.state, step).is_none()
    }

    /// Runs a started step by its executor: a skill's prompt and model call, a tool call, or
    /// the native tool loop; a step past a limit ends at once, saying which.
    fn run_step(&mut self, step: StepState, ctx: &mut Context<Self>) {
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
                if runs_natively(self.state.settings.native_tools, &step) {
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
