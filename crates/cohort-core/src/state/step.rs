//! StepState: the smallest unit of work, one skill or tool call by one agent.

use super::{Executor, StepExecutionState, StepOrigin, StepResult};
use crate::ids::{AgentId, StageRef, StepId, TaskId, WaitId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Prompt and completion tokens spent, per step and summed per agent and per task, with what
/// they cost when the model's config gives its price (`cost_per_1k_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Tokens sent to the model (the prompts).
    pub prompt_tokens: u64,
    /// Of the prompt tokens, those the endpoint served from its prompt cache (a prefix it had
    /// already evaluated), as it reports them; 0 when it reports none.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cached_prompt_tokens: u64,
    /// Tokens the model answered with.
    pub completion_tokens: u64,
    /// USD, priced by the model that spent the tokens (0 when it has no price).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cost_usd: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero_u64(x: &u64) -> bool {
    *x == 0
}

impl TokenUsage {
    /// A usage of these counts, without a price.
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        TokenUsage {
            prompt_tokens,
            completion_tokens,
            ..Default::default()
        }
    }

    /// This usage with `cached` of its prompt tokens served from the endpoint's cache (never
    /// more than the prompt).
    pub fn with_cached(mut self, cached: u64) -> Self {
        self.cached_prompt_tokens = cached.min(self.prompt_tokens);
        self
    }

    /// Prompt tokens the endpoint evaluated anew (not from its cache).
    pub fn uncached_prompt_tokens(&self) -> u64 {
        self.prompt_tokens.saturating_sub(self.cached_prompt_tokens)
    }

    /// Adds `other` to this running total (tokens and cost).
    pub fn add(&mut self, other: TokenUsage) {
        self.prompt_tokens += other.prompt_tokens;
        self.cached_prompt_tokens += other.cached_prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cost_usd += other.cost_usd;
    }

    /// What was spent since `earlier` (a reading of the same running total).
    pub fn since(&self, earlier: TokenUsage) -> TokenUsage {
        TokenUsage {
            prompt_tokens: self.prompt_tokens.saturating_sub(earlier.prompt_tokens),
            cached_prompt_tokens: self
                .cached_prompt_tokens
                .saturating_sub(earlier.cached_prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_sub(earlier.completion_tokens),
            cost_usd: (self.cost_usd - earlier.cost_usd).max(0.0),
        }
    }

    /// Prompt and completion tokens together.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// On a send_message step that answers a message: whom it answers, and the wait id to return
/// when that sender waits. The runtime keeps the sender among the receivers and, if the step
/// cannot deliver, still returns the wait id so the sender is never left blocked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplyTo {
    /// The sender being answered.
    pub agent_id: AgentId,
    /// The wait id to return, if that sender waits for the reply.
    pub wait_id: Option<WaitId>,
}

/// A step's wait for its model's endpoint, which stopped answering (connection refused, 5xx,
/// 429, a timeout, a broken stream): the call is made again once the endpoint answers, until
/// the team's `waits.model_secs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelWait {
    /// When the wait began (ms since the Unix epoch).
    pub since: i64,
    /// What the endpoint last answered.
    pub reason: String,
}

/// One step of one agent (SPEC §2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepState {
    /// The task the step works for.
    pub task_id: TaskId,
    /// Its stage, or `no_relative` for a step outside any stage.
    pub stage_id: StageRef,
    /// The agent that runs this step.
    pub agent_id: AgentId,
    /// The step's own id.
    pub step_id: StepId,
    /// What the step is meant to achieve, in a line.
    pub step_intention: String,
    /// Why the step exists: what the runtime decides on (the intention and text are for the
    /// prompt and for people).
    #[serde(default)]
    pub origin: StepOrigin,
    /// What runs it: a skill or an MCP server (`type` and `executor` on the wire).
    #[serde(flatten)]
    pub executor: Executor,
    /// Where the step is in its lifecycle.
    pub execution_state: StepExecutionState,
    /// The step's input text for its skill (what to plan, think about, send, …).
    pub text_content: String,
    /// The tool call to make (tool steps), filled by instruction_generation.
    pub instruction_content: Option<Value>,
    /// What the skill parsed or the tool returned, and the runtime's facts about the step
    /// (why it failed, its re-asks, who cancelled it).
    pub execute_result: Option<StepResult>,
    /// Tokens the step's model calls spent.
    #[serde(default)]
    pub token_usage: TokenUsage,
    /// For a send_message step that answers a message: whom it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<ReplyTo>,
    /// A manager's second try at a goal or notice after SyncState refused its first answer:
    /// that answer. Its action is not offered again (a small model repeated it word for word).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_instruction: Option<crate::message::TaskInstruction>,
    /// Set while the step waits for its model's endpoint to answer again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_wait: Option<ModelWait>,
    /// Its id in the graph plan that made it (the plan's own, e.g. `"a"`), by which the plan's
    /// other steps, a plan check and people name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<String>,
    /// The steps that must finish before this one runs (its plan's `depends_on`): until then
    /// it is `pending`; if one of them fails or is cancelled, so is this one, saying why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<StepId>,
    /// The trace it is in (`event::trace`), fixed as it is added: the trace of the message
    /// that caused it, else of the step that made it, else one of its own. The messages it
    /// sends carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<crate::event::trace::TraceId>,
    /// The span of the step that sent the message it came from (its `traceparent`): its
    /// span links to it, so one goal's work across agents and nodes reads as one trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caused_by: Option<crate::event::trace_context::TraceParent>,
    /// The model and MCP servers the message it came from chose (inherited by the steps it
    /// plans): see [`Choice`](super::Choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<Box<super::Choice>>,
}

impl StepState {
    /// The same step with its origin.
    pub fn with_origin(mut self, origin: StepOrigin) -> Self {
        self.origin = origin;
        self
    }

    /// What the step asks for, as an LLM call carries it (`ChatRequest::step_text`).
    pub fn asks(&self) -> String {
        format!("{}\n{}", self.step_intention, self.text_content)
    }

    /// A new step in `init`, with a fresh id, no result and an unknown origin.
    pub fn new(
        task_id: TaskId,
        stage_id: StageRef,
        agent_id: AgentId,
        executor: Executor,
        step_intention: impl Into<String>,
        text_content: impl Into<String>,
    ) -> Self {
        StepState {
            task_id,
            stage_id,
            agent_id,
            step_id: StepId::random(),
            step_intention: step_intention.into(),
            origin: StepOrigin::Unknown,
            executor,
            execution_state: StepExecutionState::Init,
            text_content: text_content.into(),
            instruction_content: None,
            execute_result: None,
            token_usage: TokenUsage::default(),
            reply_to: None,
            refused_instruction: None,
            model_wait: None,
            plan_id: None,
            depends_on: Vec::new(),
            trace_id: None,
            caused_by: None,
            choice: None,
        }
    }

    /// Whether this step answers a sender that waits for it.
    pub fn answers_a_wait(&self) -> bool {
        self.reply_to.as_ref().is_some_and(|r| r.wait_id.is_some())
    }

    /// A step removed by finish_stage/finish_task before it ran.
    pub fn was_dropped(&self) -> bool {
        self.execute_result.as_ref().is_some_and(|r| r.dropped)
    }

    /// The reason a failed step failed, if it recorded one.
    pub fn failure_reason(&self) -> Option<&str> {
        if self.execution_state != StepExecutionState::Failed {
            return None;
        }
        self.execute_result.as_ref()?.error.as_deref()
    }
}

/// A step as a plan names it (the JSON objects inside `<planned_step>`), before it gets ids.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedStep {
    /// What the planned step is meant to achieve.
    pub step_intention: String,
    /// What is to run it: a skill or an MCP server.
    #[serde(flatten)]
    pub executor: Executor,
    /// The input text for its skill.
    #[serde(default)]
    pub text_content: String,
    /// Its id in a graph plan (unique in the plan); None in a plan that is a plain list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The ids of the plan's steps that must finish before it runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Once it finishes, the agent plans the plan's steps that have not started again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replan: bool,
}

impl PlannedStep {
    /// A planned step run by `executor`.
    pub fn new(
        executor: Executor,
        step_intention: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        PlannedStep {
            step_intention: step_intention.into(),
            executor,
            text_content: text.into(),
            id: None,
            depends_on: Vec::new(),
            replan: false,
        }
    }

    /// Whether it belongs to a graph plan (it has an id or dependencies).
    pub fn in_graph(&self) -> bool {
        self.id.is_some() || !self.depends_on.is_empty()
    }

    /// Gives the plan a place: the task and stage of the step that planned it, and ids (its
    /// dependencies are the plan's to resolve, see `skills::plan::queue_plan`).
    pub fn into_step(self, task_id: TaskId, stage_id: StageRef, agent_id: AgentId) -> StepState {
        let mut step = StepState::new(
            task_id,
            stage_id,
            agent_id,
            self.executor,
            self.step_intention,
            self.text_content,
        );
        step.plan_id = self.id;
        step
    }
}
