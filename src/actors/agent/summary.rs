//! The agent actor writing a summary of its stage's older history before a step whose prompt
//! leaves that history out (see `agent::history_summary`): one call to its own model, whose
//! answer is kept on the agent; then the step runs. A summary that fails only leaves the step
//! without it.

use super::AgentActor;
use crate::agent::history_summary::{SummaryJob, summary_of};
use crate::llm::ChatRequest;
use crate::llm::scripted::SUMMARIZE_HISTORY;
use crate::message::ExecuteOutput;
use crate::state::{Skill, StepState, TokenUsage};
use actix::prelude::*;

impl AgentActor {
    /// A model call of this agent for `step`: the step's own answer, or a call on its behalf
    /// (a summary, a risk judgement); `name` is what a script keys its replies by.
    pub(super) fn request_for(
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
            model_wait: None,
            retry: 0,
        }
    }

    /// What a side call cost goes to the agent and, through SyncState, to the step's task (so
    /// a task's token budget counts it).
    pub(super) fn charge_side_call(
        &mut self,
        step: &StepState,
        usage: TokenUsage,
        ctx: &mut Context<Self>,
    ) {
        if usage == TokenUsage::default() {
            return;
        }
        self.state.add_tokens(usage);
        let output = ExecuteOutput {
            agent_id: Some(self.state.agent_id.clone()),
            task_id: Some(step.task_id.clone()),
            token_usage: Some((step.task_id.clone(), usage)),
            ..Default::default()
        };
        let held = self.hand_over();
        let apply = self.sync.send(crate::actors::ApplyOutput {
            output,
            held,
            settle: None,
        });
        ctx.spawn(apply.into_actor(self).map(|_, act, _| {
            act.holding -= 1;
            act.publish();
        }));
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
        let mut request = self.request_for(&step, SUMMARIZE_HISTORY, system, job.prompt.clone());
        request.model_wait = Some(Self::wait_report(ctx, &step.step_id));
        let id = step.step_id.clone();
        let handle = ctx.spawn(llm.chat(request).into_actor(self).map(move |answer, act, ctx| {
            act.in_flight = None;
            // The endpoint stayed down past the wait: the step's own call would wait again.
            if let Err(e @ crate::llm::LlmError::EndpointDown { .. }) = &answer {
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
        self.in_flight = Some((id, handle));
    }
}
