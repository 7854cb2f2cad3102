//! A skill step's LLM call: its prompt built (first, when the prompt leaves older history out
//! that no summary covers yet, a summary written), its model asked as a spawned future, and
//! the answer taken: used, asked again with the error when the skill cannot use it, or built
//! again under the model's context window when the endpoint refused the prompt as too long.

use super::AgentActor;
use actix::prelude::*;
use cohort_core::event::StepUpdate;
use cohort_core::ids::StepId;
use cohort_core::prompt::tokens::TokenCounter;
use cohort_core::prompt::{PromptContext, build_prompt};
use cohort_core::skills::answer_schema::{self, RECEIVERS_LISTED, answer_schema};
use cohort_core::skills::next_tool_step;
use cohort_core::state::StepResult;
use cohort_core::state::{Executor, Skill, StepState};
use cohort_core::step::history_summary::summary_due;
use cohort_core::step::{Asking, Completion, StepCompletion, complete_step, tool_chain};
use cohort_llm::{AnswerFormat, ChatRequest};

impl AgentActor {
    /// Builds a skill step's prompt and asks its model; first, when the prompt leaves older
    /// history out that no summary covers yet, has the model summarize it (`summarized`: done).
    pub(super) fn run_skill(
        &mut self,
        step: StepState,
        skill: Skill,
        summarized: bool,
        ctx: &mut Context<Self>,
    ) {
        let tool_step = (skill == Skill::InstructionGeneration)
            .then(|| next_tool_step(&self.state, &step).cloned())
            .flatten();
        let tool_history = (skill == Skill::ToolDecision).then(|| tool_chain(&self.state, &step));
        let tool_capabilities = tool_step
            .as_ref()
            .zip(self.mcp.as_ref())
            .and_then(|(s, mcp)| mcp.cached_description(s.executor.name()));
        // The model a message chose for this step, else the agent's own.
        let model = self.model_for(&step).cloned();
        let prompt = build_prompt(
            &self.prompts,
            skill,
            &PromptContext {
                agent: &self.state,
                step: &step,
                tool_descriptions: &self.tool_descriptions,
                tool_step: tool_step.as_ref(),
                tool_capabilities: tool_capabilities.as_deref(),
                tool_history: tool_history.as_deref(),
                budget: model.as_ref().and_then(|m| m.prompt_budget()),
                tokens: model
                    .as_ref()
                    .map_or(TokenCounter::Estimate, |m| m.token_counter()),
                constrained: model.as_ref().is_some_and(|m| m.constrains_answers()),
            },
        );
        if !summarized
            && model.is_some()
            && let Some(job) = summary_due(&self.state, &step, prompt.history_omitted)
        {
            return self.summarize_then_run(step, skill, job, ctx);
        }
        let answer_format = model
            .as_ref()
            .is_some_and(|m| m.constrains_answers() && answer_schema::constrained(skill))
            .then(|| AnswerFormat {
                name: skill.name().to_owned(),
                schema: answer_schema(skill, &self.state, &step, &self.receivers(skill)),
            });
        let request = ChatRequest {
            answer_format,
            images: self.images_for(&prompt.media),
            ..self.request_for(&step, skill.name(), prompt.system, prompt.user)
        };
        let id = step.step_id.clone();
        if model.is_none() {
            let asking = Asking::new(
                request,
                &self.state.settings.repairs,
                self.state.settings.texts.clone(),
            );
            self.on_answer(
                id,
                Err(self.state.settings.texts.agent_has_no_llm()),
                asking,
                ctx,
            );
            return;
        }
        let asking = Asking::new(
            request.clone(),
            &self.state.settings.repairs,
            self.state.settings.texts.clone(),
        );
        self.ask(id, request, asking, ctx);
    }

    /// The agents a send_message step may address, for its answer's schema: the team's agents
    /// while there are few enough to list.
    fn receivers(&self, skill: Skill) -> Vec<String> {
        if !matches!(skill, Skill::SendMessage | Skill::TaskManager) {
            return Vec::new();
        }
        self.outlet.receivers(RECEIVERS_LISTED)
    }

    /// Sends a step's request to its model; the answer comes back to `on_answer`.
    fn ask(
        &mut self,
        id: StepId,
        mut request: ChatRequest,
        asking: Asking,
        ctx: &mut Context<Self>,
    ) {
        let step = self.state.agent_step.get(&id);
        let Some(llm) = step.and_then(|s| self.model_for(s)).cloned() else {
            return;
        };
        let progress = self.answer_progress(&id);
        request.progress = Some(progress.clone());
        request.model_wait = Some(Self::wait_report(ctx, &id));
        // Each ask (a re-ask too) counts the messages taken by then (a replay keeps that order).
        request.intake = Some(self.intake.for_request());
        let step_id = id.clone();
        let call = ctx.spawn(
            llm.chat(request)
                .into_actor(self)
                .map(move |res, act, ctx| {
                    act.phase.call_returned(&id);
                    Self::tell_whole(&progress, &res);
                    if let Err(cohort_llm::LlmError::ContextExceeded { window, .. }) = &res
                        && act.rebuild_for_context(&id, *window, ctx)
                    {
                        return;
                    }
                    // An endpoint that stayed down past `waits.model_secs` ends the task.
                    let mut asking = asking;
                    if let Err(e @ cohort_llm::LlmError::EndpointDown { .. }) = &res {
                        asking.endpoint_down = Some(e.to_string());
                    }
                    act.on_answer(id, res.map_err(|e| e.to_string()), asking, ctx)
                }),
        );
        self.phase.call_out(&step_id, call);
    }

    /// The endpoint refused step `id`'s prompt as longer than its `window`: the prompt is built
    /// again under the window the model has now learned (older history left out, or folded
    /// into a summary first), once. False when it was rebuilt already.
    fn rebuild_for_context(&mut self, id: &StepId, window: u32, ctx: &mut Context<Self>) -> bool {
        let Some(step) = self.state.agent_step.get(id).cloned() else {
            return false;
        };
        let Executor::Skill(skill) = step.executor else {
            return false;
        };
        if !self.phase.rebuild_for_context(id) {
            return false;
        }
        tracing::warn!(agent = %self.state.agent_id, step = %id, window, "the prompt was too long for the model; building it again under its context window");
        self.run_skill(step, skill, false, ctx);
        true
    }

    /// Takes the model's answer to step `id` (or why there is none): the step completes, or
    /// its model is asked again with what was wrong.
    fn on_answer(
        &mut self,
        id: StepId,
        reply: Result<cohort_llm::ChatReply, String>,
        mut asking: Asking,
        ctx: &mut Context<Self>,
    ) {
        let now = cohort_core::clock::Now::current();
        let usage = reply.as_ref().map(|r| r.usage).unwrap_or_default();
        // Asking again failed itself: the step fails for the answer it could not use.
        let reply = match (reply, asking.tries.last()) {
            (Err(e), Some(last)) => Err(format!(
                "{} step failed: {}; asking the model again failed: {e}",
                asking.request.skill,
                last.error.as_str()
            )),
            (reply, _) => reply,
        };
        // A model that gives the same unusable answer again is stuck on it: no more asking.
        let stuck = reply.as_ref().is_ok_and(|r| asking.stuck_on(&r.text));
        let may_ask_again = asking.may_ask_again() && !stuck;
        match complete_step(&mut self.state, &id, reply, now, may_ask_again) {
            // An answer the skill cannot use: the same question again, with the error. The
            // step shows the try meanwhile.
            Completion::AskAgain {
                error,
                answer,
                rule,
            } => {
                tracing::info!(agent = %self.state.agent_id, step = %id, "asking again: {error}");
                let request = asking.again(&error, &answer, usage, rule);
                self.state.update_step(
                    &id,
                    StepUpdate {
                        execute_result: Some(Box::new(StepResult {
                            reasked: asking.tries.clone(),
                            ..Default::default()
                        })),
                        ..Default::default()
                    },
                );
                self.publish();
                self.ask(id, request, asking, ctx);
            }
            Completion::Done(mut completion) => {
                if !asking.tries.is_empty() {
                    self.record_tries(&id, &asking, &mut completion);
                }
                completion.output.endpoint_down = asking.endpoint_down.take();
                self.apply_completion(id, completion, ctx);
            }
        }
    }

    /// A step that was asked again keeps its tries in its result, and counts their tokens.
    fn record_tries(&mut self, id: &StepId, asking: &Asking, completion: &mut StepCompletion) {
        let Some(step) = self.state.agent_step.get(id) else {
            return;
        };
        let mut result = step.execute_result.clone().unwrap_or_default();
        result.reasked = asking.tries.clone();
        let mut total = step.token_usage;
        total.add(asking.spent);
        self.state.update_step(
            id,
            StepUpdate {
                execute_result: Some(Box::new(result)),
                token_usage: Some(total),
                ..Default::default()
            },
        );
        // Each re-ask is a firing of its rule (`reask`, `echo`, `echo_asked_afresh`), counted in
        // the step's task.
        completion
            .output
            .repairs
            .extend(asking.fired.iter().copied());
        if let Some((_, usage)) = completion.output.token_usage.as_mut() {
            usage.add(asking.spent);
        } else {
            completion.output.token_usage = Some((asking.request.task_id.clone(), asking.spent));
        }
    }
}
