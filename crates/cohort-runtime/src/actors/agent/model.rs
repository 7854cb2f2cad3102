//! What every model call of a step shares, its own or one on its behalf (a summary, a risk
//! judgement, a tool loop's round): its request, where it reports a wait for its endpoint
//! (`ModelWaiting`) and its streamed answer, what a side call costs, and the step's end when
//! the endpoint stayed down past `waits.model_secs`.

use super::AgentActor;
use super::commit::Handover;
use super::messages::ModelWaiting;
use actix::prelude::*;
use cohort_core::call::ModelWaitReport;
use cohort_core::call::media::{Blob, MediaRef};
use cohort_core::event::StepUpdate;
use cohort_core::ids::StepId;
use cohort_core::message::ExecuteOutput;
use cohort_core::state::{StepExecutionState, StepState, TokenUsage};
use cohort_core::step::{Completion, complete_step};
use cohort_llm::{AnswerProgress, ChatRequest};
use std::sync::Arc;

/// The most images one model call is sent: each costs the model hundreds of tokens or more.
pub const MOST_IMAGES: usize = 8;

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
            images: Vec::new(),
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
            mending: cohort_llm::Mending::of(&self.state.settings.repairs),
            intake: Some(self.intake.for_request()),
        }
    }

    /// The images among `media` (a prompt's, oldest first) sent to a model that takes images:
    /// the newest [`MOST_IMAGES`] still held in memory (after a restart the prompt describes
    /// them only); none for a model that does not take them.
    pub(super) fn images_for(&self, media: &[MediaRef]) -> Vec<Arc<Blob>> {
        if !self.llm.as_ref().is_some_and(|m| m.takes_images()) {
            return Vec::new();
        }
        let mut images: Vec<_> = media
            .iter()
            .rev()
            .filter(|m| m.is_image())
            .filter_map(|m| self.outlet.blob(&m.blob))
            .take(MOST_IMAGES)
            .collect();
        images.reverse();
        images
    }

    /// Where a call of step `id` says that it waits for its model's endpoint: the step shows it.
    pub(super) fn wait_report(ctx: &Context<Self>, id: &StepId) -> ModelWaitReport {
        let (me, step) = (ctx.address(), id.clone());
        ModelWaitReport::new(move |wait| me.do_send(ModelWaiting(step.clone(), wait)))
    }

    /// Where a streamed answer of step `id` goes while it is written: the monitor's live feed.
    pub(super) fn answer_progress(&self, id: &StepId) -> AnswerProgress {
        let (outlet, agent, step) = (self.outlet.clone(), self.state.agent_id.clone(), id.clone());
        AnswerProgress::new(move |text| outlet.writing(&agent, &step, text))
    }

    /// A stream tells its text a few times a second, so the last it told may fall short of the
    /// answer: the whole answer is told once it is in, and readers of the text (the task event
    /// stream's TEXT_ADD) end with all of it.
    pub(super) fn tell_whole(
        progress: &AnswerProgress,
        reply: &Result<cohort_llm::ChatReply, cohort_llm::LlmError>,
    ) {
        if let Ok(r) = reply
            && !r.text.is_empty()
        {
            progress.tell(&r.text);
        }
    }

    /// A side call of step `id` (its history's summary, a tool loop's round) found the model's
    /// endpoint down past `waits.model_secs`: the step fails, and its task with it, as when its
    /// own call does.
    pub(super) fn give_up_for_endpoint(
        &mut self,
        id: StepId,
        why: String,
        ctx: &mut Context<Self>,
    ) {
        let now = cohort_core::clock::Now::current();
        if let Completion::Done(mut completion) =
            complete_step(&mut self.state, &id, Err(why.clone()), now, false)
        {
            completion.output.endpoint_down = Some(why);
            self.apply_completion(id, completion, ctx);
        }
    }

    /// Asks `llm` a question about the tool call of `step` on its behalf (its risk, its
    /// refusal, its arguments anew; `ask`: what a script keys its replies by, the instructions
    /// and the question). What it cost is charged like any side call; `then` gets the answer's
    /// text (or why there is none) while the step still runs for live work, and a step whose
    /// work ended meanwhile ends as a tool result.
    pub(super) fn ask_about_call(
        &mut self,
        llm: Arc<dyn cohort_llm::ChatModel>,
        step: StepState,
        (name, system, prompt): (&str, String, String),
        then: impl FnOnce(&mut Self, StepState, Result<String, String>, &mut Context<Self>) + 'static,
        ctx: &mut Context<Self>,
    ) {
        let mut request = self.request_for(&step, name, system, prompt);
        request.model_wait = Some(Self::wait_report(ctx, &step.step_id));
        let id = step.step_id.clone();
        let handle = ctx.spawn(
            llm.chat(request)
                .into_actor(self)
                .map(move |answer, act, ctx| {
                    act.phase.call_returned(&step.step_id);
                    if let Ok(reply) = &answer {
                        act.charge_side_call(&step, reply.usage, ctx);
                    }
                    if !act.still_live(&step) {
                        return act.on_tool_result(step.step_id, Err("ended".into()), ctx);
                    }
                    then(
                        act,
                        step,
                        answer.map(|r| r.text).map_err(|e| e.to_string()),
                        ctx,
                    );
                }),
        );
        self.phase.call_out(&id, handle);
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
        let commit = self.commit(Handover::Output(output, None));
        ctx.spawn(commit.map(|_, act, _| act.publish()));
    }
}

impl Handler<ModelWaiting> for AgentActor {
    type Result = ();
    fn handle(&mut self, ModelWaiting(id, wait): ModelWaiting, _: &mut Context<Self>) {
        // Only a step still running waits; one that ended (or vanished) waits for nothing.
        let running = self
            .state
            .agent_step
            .get(&id)
            .is_some_and(|s| s.execution_state == StepExecutionState::Running);
        if running {
            self.state.update_step(
                &id,
                StepUpdate {
                    model_wait: Some(wait),
                    ..Default::default()
                },
            );
            self.publish();
        }
    }
}
