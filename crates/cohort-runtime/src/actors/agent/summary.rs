//! The agent actor writing a summary of its stage's older history before a step whose prompt
//! leaves that history out (see `step::history_summary`): one call to its own model, whose
//! answer is kept on the agent; then the step runs. A summary that fails only leaves the step
//! without it.

use super::AgentActor;
use actix::prelude::*;
use cohort_core::state::{Skill, StepState};
use cohort_core::step::history_summary::{SummaryJob, summary_of};
use cohort_llm::scripted::SUMMARIZE_HISTORY;

impl AgentActor {
    /// Has the model summarize the history `job` covers, keeps the summary, then runs `step`.
    pub(super) fn summarize_then_run(
        &mut self,
        step: StepState,
        skill: Skill,
        job: SummaryJob,
        ctx: &mut Context<Self>,
    ) {
        let Some(llm) = self.llm.clone() else {
            return self.run_skill(step, skill, true, ctx);
        };
        let system = self.prompts.phrases().summarize_history.clone();
        let mut request = self.request_for(&step, SUMMARIZE_HISTORY, system, job.prompt.clone());
        request.model_wait = Some(Self::wait_report(ctx, &step.step_id));
        let id = step.step_id.clone();
        let handle = ctx.spawn(llm.chat(request).into_actor(self).map(move |answer, act, ctx| {
            act.phase.call_returned(&step.step_id);
            // The endpoint stayed down past the wait: the step's own call would wait again.
            if let Err(e @ cohort_llm::LlmError::EndpointDown { .. }) = &answer {
                return act.give_up_for_endpoint(step.step_id, e.to_string(), ctx);
            }
            let written = match answer {
                Ok(reply) => {
                    act.charge_side_call(&step, reply.usage, ctx);
                    summary_of(&step, &job, &reply.text)
                }
                Err(e) => {
                    tracing::warn!(agent = %act.state.agent_id, step = %step.step_id, "the history summary failed: {e}");
                    None
                }
            };
            // A summary that could not be written keeps the one before (or "none") up to the
            // same step, so it is tried again only once more steps were left out, not before
            // every step, and nothing summarized before is lost.
            let before = act
                .state
                .history_summary(&step.task_id, &step.stage_id)
                .map(|s| s.text.clone())
                .unwrap_or_else(|| act.prompts.phrases().none.clone());
            if let Some(s) = written.or_else(|| summary_of(&step, &job, &before)) {
                act.state.keep_history_summary(s);
            }
            act.run_skill(step, skill, true, ctx);
        }));
        self.phase.call_out(&id, handle);
    }
}
