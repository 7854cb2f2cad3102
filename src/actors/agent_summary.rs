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
        let request = ChatRequest {
            system: self.prompts.phrases().summarize_history.clone(),
            prompt: job.prompt.clone(),
            answer_format: None,
            tools: Vec::new(),
            rounds: Vec::new(),
            agent_id: self.state.agent_id.clone(),
            skill: SUMMARIZE_HISTORY.to_owned(),
            task_id: step.task_id.clone(),
            stage_id: step.stage_id.clone(),
            step_id: step.step_id.clone(),
            template: self.state.template.clone(),
            step_text: step.asks(),
            progress: None,
            retry: 0,
        };
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
