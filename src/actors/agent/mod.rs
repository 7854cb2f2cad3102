//! The agent actor: owns one AgentState. It runs the next step whenever it runs none, its step
//! lock is empty and `todo` is not; the step's LLM call runs as a spawned future, so the
//! mailbox keeps taking messages (a reply that frees the lock, a finish_stage) meanwhile.

use super::sync_state::{ApplyOutput, SyncStateActor};
use crate::agent::history_summary::summary_due;
use crate::agent::tool_loop::runs_natively;
use crate::agent::{
    Asking, Completion, FollowUp, Settle, StepCompletion, complete_step, receive_as_human,
    receive_message, release_for, stop_reason, stop_step, tool_chain,
};
use crate::event::{Change, StepUpdate};
use crate::ids::{StageRef, StepId};
use crate::llm::breaker::ModelWaitReport;
use crate::llm::tokens::TokenCounter;
use crate::llm::{AnswerFormat, AnswerProgress, ChatModel, ChatRequest};
use crate::mcp::McpClient;
use crate::message::Message;
use crate::monitor::Monitor;
use crate::prompt::{PromptContext, PromptSet, build_prompt};
use crate::skills::answer_schema::{self, RECEIVERS_LISTED, answer_schema};
use crate::skills::next_tool_step;
use crate::state::{AgentState, Executor, Skill, StepState};
use actix::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What an agent needs to use tools: the servers' descriptions (for its prompts) and the
/// team's shared MCP client.
#[derive(Clone, Default)]
pub struct AgentTools {
    pub descriptions: Arc<BTreeMap<String, String>>,
    pub mcp: Option<Arc<McpClient>>,
    /// The people asked to approve a tool call (the team's operators).
    pub approvers: Arc<[crate::ids::AgentId]>,
}

/// How many finished `no_relative` steps of a task an agent keeps in its step list (the base
/// task never ends; see `AgentState::trim_loose_history`). Prompts show fewer than this.
pub(super) const LOOSE_HISTORY_KEPT: usize = 64;

pub struct AgentActor {
    state: AgentState,
    /// None for a human agent: its steps record what the person did and never run.
    llm: Option<Arc<dyn ChatModel>>,
    prompts: Arc<PromptSet>,
    tool_descriptions: Arc<BTreeMap<String, String>>,
    /// The team's one MCP client (None when the team has no servers).
    mcp: Option<Arc<McpClient>>,
    sync: Addr<SyncStateActor>,
    monitor: Monitor,
    /// A step is in flight: its LLM call or SyncState's answer is outstanding.
    busy: bool,
    /// How many hand-overs SyncState has not answered yet: it is storing this agent's changes
    /// with a step's output (or a person's messages), and nothing is published until it
    /// answered, so the agent's changes stay in order.
    holding: u32,
    /// The timer for the soonest wait deadline on the step lock.
    wait_timer: timers::WaitTimer,
    /// Who is asked to approve a tool call.
    approvers: Arc<[crate::ids::AgentId]>,
    /// The tool step waiting for a person's approval (the agent runs nothing else meanwhile).
    awaiting_approval: Option<StepId>,
    /// The step whose LLM or tool call is in flight, and the call's future: abandoned when the
    /// step's stage or task ends (finished or cancelled) before it answers.
    in_flight: Option<(StepId, SpawnHandle)>,
    /// The step whose end SyncState is storing (it can no longer be cancelled).
    settling: Option<StepId>,
    /// A person's verdict on the step being settled (its wait is published before this agent
    /// has taken SyncState's answer): decided as soon as it has.
    pending_verdict: Option<person::PendingVerdict>,
    /// The step whose prompt was built again after the endpoint refused it as longer than its
    /// context window (once per step: the model now knows the window).
    rebuilt_for_context: Option<StepId>,
}

mod cancel;
mod commit;
mod human;
mod person;
mod summary;
mod timers;
mod tool_call;
mod tool_gate;
mod tool_loop;
pub use cancel::CancelStep;
pub use human::{HumanSend, SendRefused};
pub use person::{Decide, SetPaused};

/// How long a tool call waits for the store to confirm its step started.
pub(super) const STORE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

impl AgentActor {
    pub fn new(
        state: AgentState,
        llm: Option<Arc<dyn ChatModel>>,
        prompts: Arc<PromptSet>,
        tools: AgentTools,
        sync: Addr<SyncStateActor>,
        monitor: Monitor,
    ) -> Self {
        let AgentTools {
            descriptions: tool_descriptions,
            mcp,
            approvers,
        } = tools;
        AgentActor {
            state,
            llm,
            prompts,
            tool_descriptions,
            mcp,
            sync,
            monitor,
            busy: false,
            holding: 0,
            wait_timer: None,
            approvers,
            awaiting_approval: None,
            in_flight: None,
            rebuilt_for_context: None,
            settling: None,
            pending_verdict: None,
        }
    }

    /// The agents a send_message step may address, for its answer's schema: the team's agents
    /// while there are few enough to list.
    fn receivers(&self, skill: Skill) -> Vec<String> {
        if !matches!(skill, Skill::SendMessage | Skill::TaskManager) {
            return Vec::new();
        }
        self.monitor.read(|s| {
            if s.agents.len() > RECEIVERS_LISTED {
                return Vec::new();
            }
            s.agents.keys().map(|a| a.to_string()).collect()
        })
    }

    /// Publishes the changes this agent made to itself since it last published.
    fn publish(&mut self) {
        if self.holding > 0 {
            return;
        }
        self.state.refresh_working_state();
        self.monitor.publish(self.state.take_changes());
    }

    /// The changes since the last publish, for SyncState to store with what it applies; the
    /// agent holds its later changes until SyncState answered.
    fn hand_over(&mut self) -> Vec<Change> {
        self.state.refresh_working_state();
        self.holding += 1;
        self.state.take_changes()
    }

    fn try_run(&mut self, ctx: &mut Context<Self>) {
        self.arm_wait_timer(ctx);
        self.check_awaiting_approval(ctx);
        // A reply owed to a waiting sender runs even while this agent waits itself: two agents
        // waiting on each other would otherwise block both for good.
        let may_run = self.state.step_lock.is_empty()
            || self
                .state
                .next_runnable()
                .is_some_and(StepState::answers_a_wait);
        if self.busy || self.awaiting_approval.is_some() || !may_run || self.state.paused {
            self.publish();
            return;
        }
        let Some(step) = self.state.start_next() else {
            self.publish();
            return;
        };
        self.busy = true;
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
        let prompt = build_prompt(
            &self.prompts,
            skill,
            &PromptContext {
                agent: &self.state,
                step: &step,
                tool_descriptions: &self.tool_descriptions,
                tool_step: tool_step.as_ref(),
                tool_capabilities: tool_capabilities.as_ref(),
                tool_history: tool_history.as_deref(),
                budget: self.llm.as_ref().and_then(|m| m.prompt_budget()),
                tokens: self
                    .llm
                    .as_ref()
                    .map_or(TokenCounter::Estimate, |m| m.token_counter()),
            },
        );
        if !summarized && self.llm.is_some() {
            if let Some(job) = summary_due(&self.state, &step, prompt.history_omitted) {
                return self.summarize_then_run(step, skill, job, ctx);
            }
        }
        let answer_format = self
            .llm
            .as_ref()
            .is_some_and(|m| m.constrains_answers() && answer_schema::constrained(skill))
            .then(|| AnswerFormat {
                name: skill.name().to_owned(),
                schema: answer_schema(skill, &self.state, &step, &self.receivers(skill)),
                note: self.prompts.phrases().json_answer.clone(),
            });
        let request = ChatRequest {
            answer_format,
            ..self.request_for(&step, skill.name(), prompt.system, prompt.user)
        };
        let id = step.step_id.clone();
        if self.llm.is_none() {
            let asking = Asking::new(request);
            self.on_answer(
                id,
                Err("this agent has no LLM (a human agent's steps never run)".into()),
                asking,
                ctx,
            );
            return;
        }
        self.ask(id, request.clone(), Asking::new(request), ctx);
    }

    /// Sends a step's request to its model; the answer comes back to `on_answer`.
    fn ask(
        &mut self,
        id: StepId,
        mut request: ChatRequest,
        asking: Asking,
        ctx: &mut Context<Self>,
    ) {
        let Some(llm) = &self.llm else {
            return;
        };
        request.progress = Some(self.answer_progress(&id));
        request.model_wait = Some(Self::wait_report(ctx, &id));
        let step = id.clone();
        let call = ctx.spawn(
            llm.chat(request)
                .into_actor(self)
                .map(move |res, act, ctx| {
                    act.in_flight = None;
                    if let Err(crate::llm::LlmError::ContextExceeded { window, .. }) = &res
                        && act.rebuild_for_context(&id, *window, ctx)
                    {
                        return;
                    }
                    // An endpoint that stayed down past `waits.model_secs` ends the task.
                    let mut asking = asking;
                    if let Err(e @ crate::llm::LlmError::EndpointDown { .. }) = &res {
                        asking.endpoint_down = Some(e.to_string());
                    }
                    act.on_answer(id, res.map_err(|e| e.to_string()), asking, ctx)
                }),
        );
        self.in_flight = Some((step, call));
    }

    /// The endpoint refused step `id`'s prompt as longer than its `window`: the prompt is built
    /// again under the window the model has now learned (older history left out, or folded
    /// into a summary first), once. False when it was rebuilt already.
    fn rebuild_for_context(&mut self, id: &StepId, window: u32, ctx: &mut Context<Self>) -> bool {
        if self.rebuilt_for_context.as_ref() == Some(id) {
            return false;
        }
        let Some(step) = self.state.agent_step.get(id).cloned() else {
            return false;
        };
        let Executor::Skill(skill) = step.executor else {
            return false;
        };
        tracing::warn!(agent = %self.state.agent_id, step = %id, window, "the prompt was too long for the model; building it again under its context window");
        self.rebuilt_for_context = Some(id.clone());
        self.run_skill(step, skill, false, ctx);
        true
    }

    /// Where a call of step `id` says that it waits for its model's endpoint: the step shows it.
    pub(super) fn wait_report(ctx: &Context<Self>, id: &StepId) -> ModelWaitReport {
        let (me, step) = (ctx.address(), id.clone());
        ModelWaitReport::new(move |wait| me.do_send(ModelWaiting(step.clone(), wait)))
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
        let now = crate::clock::Now::current();
        if let Completion::Done(mut completion) =
            complete_step(&mut self.state, &id, Err(why.clone()), now, false)
        {
            completion.output.endpoint_down = Some(why);
            self.apply_completion(id, completion, ctx);
        }
    }

    /// Where a streamed answer of step `id` goes while it is written: the monitor's live feed.
    pub(super) fn answer_progress(&self, id: &StepId) -> AnswerProgress {
        let (monitor, agent, step) = (
            self.monitor.clone(),
            self.state.agent_id.clone(),
            id.clone(),
        );
        AnswerProgress::new(move |text| monitor.writing(&agent, &step, text))
    }

    fn on_answer(
        &mut self,
        id: StepId,
        reply: Result<crate::llm::ChatReply, String>,
        mut asking: Asking,
        ctx: &mut Context<Self>,
    ) {
        let now = crate::clock::Now::current();
        let usage = reply.as_ref().map(|r| r.usage).unwrap_or_default();
        // Asking again failed itself: the step fails for the answer it could not use.
        let reply = match (reply, asking.tries.last()) {
            (Err(e), Some(last)) => Err(format!(
                "{} step failed: {}; asking the model again failed: {e}",
                asking.request.skill,
                last["error"].as_str().unwrap_or_default()
            )),
            (reply, _) => reply,
        };
        // A model that gives the same unusable answer again is stuck on it: no more asking.
        let stuck = reply.as_ref().is_ok_and(|r| asking.gave_before(&r.text));
        let may_ask_again = asking.may_ask_again() && !stuck;
        match complete_step(&mut self.state, &id, reply, now, may_ask_again) {
            // An answer the skill cannot use: the same question again, with the error. The
            // step shows the try meanwhile.
            Completion::AskAgain { error, answer } => {
                tracing::info!(agent = %self.state.agent_id, step = %id, "asking again: {error}");
                let request = asking.again(&error, &answer, usage);
                self.state.update_step(
                    &id,
                    StepUpdate {
                        execute_result: Some(json!({ "reasked": asking.tries })),
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
        let mut result = step.execute_result.clone().unwrap_or_else(|| json!({}));
        if let Some(r) = result.as_object_mut() {
            r.insert("reasked".into(), json!(asking.tries));
        }
        let mut total = step.token_usage;
        total.add(asking.spent);
        self.state.update_step(
            id,
            StepUpdate {
                execute_result: Some(result),
                token_usage: Some(total),
                ..Default::default()
            },
        );
        if let Some((_, usage)) = completion.output.token_usage.as_mut() {
            usage.add(asking.spent);
        } else {
            completion.output.token_usage = Some((asking.request.task_id.clone(), asking.spent));
        }
    }

    /// Hands a finished step's output to SyncState with the agent's changes and how the step
    /// closes: SyncState stores them all in one commit, so a restart finds either nothing of
    /// the step's end (it runs again) or all of it (it never runs twice).
    fn apply_completion(
        &mut self,
        id: StepId,
        completion: StepCompletion,
        ctx: &mut Context<Self>,
    ) {
        let settle = Settle::of(&self.state, &id, completion.failure, completion.added_waits);
        self.settling = Some(id.clone());
        let held = self.hand_over();
        ctx.spawn(
            self.sync
                .send(ApplyOutput {
                    output: completion.output,
                    held,
                    settle: settle.clone(),
                })
                .into_actor(self)
                .map(move |res, act, ctx| {
                    act.holding -= 1;
                    act.settling = None;
                    match (res, settle) {
                        // Stored by SyncState: the same closing is applied here, not published
                        // again (SyncState also told whoever waited for a failed step's reply).
                        (Ok(answer), Some(settle)) => {
                            let refused = answer.err();
                            let failure = settle.outcome(refused.as_ref());
                            act.state.apply_stored(settle.changes(failure.as_deref()));
                            if let (None, Some(why)) = (&settle.failure, &failure)
                                && refused.is_some()
                            {
                                let barred = refused
                                    .as_ref()
                                    .is_some_and(crate::sync::SyncError::bars_the_action);
                                match crate::agent::act_again_after_refusal(
                                    &mut act.state,
                                    &id,
                                    why,
                                    barred,
                                ) {
                                    FollowUp::Again => act.publish(),
                                    FollowUp::Close(closing) => act.close_in_place(closing, ctx),
                                    FollowUp::Nothing => {}
                                }
                            }
                            act.settled(&id, failure, ctx);
                        }
                        (Ok(_), None) => act.settled(&id, Some("step vanished".into()), ctx),
                        // The team is stopping: nothing of the step's end was stored (a
                        // restart runs it again), and nothing more is published.
                        (Err(e), _) => {
                            // A verdict waiting for this end gets its answer (dropped: refused).
                            act.pending_verdict = None;
                            tracing::warn!(agent = %act.state.agent_id, step = %id, "SyncState is unreachable: {e}");
                        }
                    }
                }),
        );
    }

    /// After a step closed: trims history, lets go of a step whose work ended meanwhile, and
    /// runs the next one.
    fn settled(&mut self, id: &StepId, failure: Option<String>, ctx: &mut Context<Self>) {
        if let Some(f) = &failure {
            tracing::warn!(agent = %self.state.agent_id, step = %id, "step failed: {f}");
        }
        if let Some(task) = self
            .state
            .agent_step
            .get(id)
            .filter(|s| s.stage_id == StageRef::NoRelative)
            .map(|s| s.task_id.clone())
        {
            self.state.trim_loose_history(&task, LOOSE_HISTORY_KEPT);
        }
        // A step whose stage or task was finished while it ran leaves the queue once done.
        if let Some(s) = self.state.agent_step.get(id) {
            if !self.state.holds(&s.task_id, &s.stage_id) {
                self.state.remove_step(id);
            }
        }
        self.busy = false;
        if failure.is_none()
            && self
                .state
                .agent_step
                .get(id)
                .is_some_and(crate::agent::plan_check::awaits_check)
        {
            self.await_plan_check(id.clone(), ctx);
        }
        self.take_pending_verdict(ctx);
        self.try_run(ctx);
    }
}

impl Actor for AgentActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // The factory published the agent before starting it; anything since goes out now.
        self.publish();
        // An agent carried over from a store: a tool call the restart cut off is made again
        // if its tool says that is harmless, else settled as a failed call; then whatever its
        // queue holds runs.
        for id in crate::agent::interrupted_tool_steps(&self.state) {
            self.busy = true;
            self.resume_tool_step(id, ctx);
        }
        // A call that was waiting for a person's approval waits on (they were told already).
        if let Some(id) = crate::agent::approval::waiting_for_approval(&self.state) {
            // A tool call that waits is the agent's current step (its verdict runs it); a plan
            // that waits was settled already, and nothing runs until it is checked.
            let tool = self
                .state
                .agent_step
                .get(&id)
                .is_some_and(|s| matches!(s.executor, Executor::Tool(_)));
            self.busy = tool;
            if self.approvers.is_empty() {
                let why = "the step waited for a person's approval, but the team no longer has \
                           an operator to ask";
                self.fail_waiting(id, why.into(), ctx);
            } else {
                self.hold_for_a_person(id, ctx);
            }
        }
        self.try_run(ctx);
    }
}

/// A message for this agent from the dispatcher, with SyncState's number for it (the agent
/// acknowledges it; 0: a message no one tracks).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Deliver(pub u64, pub Arc<Message>);

/// A copy of the agent's state.
#[derive(Message)]
#[rtype(result = "AgentState")]
pub struct GetAgentState;

/// A step's model call began (`Some`) or stopped (`None`) waiting for its endpoint.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ModelWaiting(pub StepId, pub Option<crate::state::ModelWait>);

impl Handler<ModelWaiting> for AgentActor {
    type Result = ();
    fn handle(&mut self, ModelWaiting(id, wait): ModelWaiting, _: &mut Context<Self>) {
        // Only a step still running waits; one that ended (or vanished) waits for nothing.
        let running = self
            .state
            .agent_step
            .get(&id)
            .is_some_and(|s| s.execution_state == crate::state::StepExecutionState::Running);
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

impl Handler<Deliver> for AgentActor {
    type Result = ();
    fn handle(&mut self, Deliver(no, m): Deliver, ctx: &mut Context<Self>) {
        // The receipt goes out with what the message made of this agent, in one commit.
        self.state.note_received(no);
        if self.state.human_config.is_some() {
            let now = crate::clock::local_timestamp();
            receive_as_human(&mut self.state, &m, &now);
            self.publish();
            self.arm_wait_timer(ctx);
            return;
        }
        let received = receive_message(&mut self.state, &m);
        if let Some(p) = received.problem {
            tracing::warn!(agent = %self.state.agent_id, "{p}");
        }
        // Steps the message dropped that owed a waiting sender its reply: the senders get
        // their wait ids back in the same commit as the receipt and the drop.
        let releases: Vec<Message> = received
            .dropped
            .iter()
            .filter_map(|step| {
                release_for(
                    &self.state,
                    step,
                    "its stage or task was finished before it ran",
                )
            })
            .collect();
        if !releases.is_empty() {
            self.submit_with_changes(releases, ctx);
        }
        self.abandon_ended_call(ctx);
        self.try_run(ctx);
    }
}

impl Handler<GetAgentState> for AgentActor {
    type Result = MessageResult<GetAgentState>;
    fn handle(&mut self, _: GetAgentState, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.state.clone())
    }
}
