//! The agent actor writing a summary of its stage's older history before a step whose prompt
//! leaves that history out (see `agent::history_summary`): one call to its own model, whose
//! answer is kept on the agent; then the step runs. A summary that fails only leaves the step
//! without it.

use super::AgentActor;
use crate::agent::history_summary::{SummaryJob, summary_of};
use crate::llm::ChatRequest;
use crate::llm::scripted::SUMMARIZE_HISTORY;
use crate::state::{Skill, StepState};
use actix::prelude::*;

impl AgentActor {
    /// A model call of this agent for `step` that is not the step's own answer (a summary, a
    /// risk judgement): `name` is what a script keys its replies by.
    pub(super) fn side_request(
        &self,
        step: &StepState,
        name: &str,
        system: String,
        prompt: String,
    ) -> ChatRequest {
        ChatRequest {
            system,
            prompt,
            answer_format: None,
            tools: Vec::new(),
            rounds: Vec::new(),
            agent_id: self.state.agent_id.clone(),
            skill: name.to_owned(),
            task_id: step.task_id.clone(),
            stage_id: step.stage_id.clone(),
            step_id: step.step_id.clone(),
            template: self.state.template.clone(),
            step_text: step.asks(),
            progress: None,
            retry: 0,
        }
    }

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
        let request = self.side_request(&step, SUMMARIZE_HISTORY, system, job.prompt.clone());
        let id = step.step_id.clone();
        let handle = ctx.spawn(llm.chat(request).into_actor(self).map(move |answer, act, ctx| {
            act.in_flight = None;
            let written = match answer {
                Ok(reply) => {
                    act.state.add_tokens(reply.usage);
                    summary_of(&step, &job, &reply.text)
                }
                Err(e) => {
                    tracing::warn!(agent = %act.state.agent_id, step = %step.step_id, "the history summary failed: {e}");
                    None
                }
            };
            // A summary that could not be written is kept as "none" up to the same step, so
            // it is tried again only once more steps were left out, not before every step.
            let none = act.prompts.phrases().none.clone();
            if let Some(s) = written.or_else(|| summary_of(&step, &job, &none)) {
                act.state.keep_history_summary(s);
            }
            act.run_skill(step, skill, true, ctx);
        }));
        self.in_flight = Some((id, handle));
    }
}
