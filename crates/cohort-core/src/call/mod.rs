//! A model call as data: the request a step makes ([`ChatRequest`], with what the provider may
//! mend of the model's slips, [`Mending`]), the reply it gets ([`ChatReply`], cut short or
//! whole), the tool calls of a native tool loop, and an MCP server call ([`McpCall`]). The
//! clients that make these calls are `llm` and `mcp`; the step machine only reads and writes
//! these types.

pub mod mcp;
pub mod media;
pub mod repairs;
pub mod repetition;
pub mod replay;
pub mod structured;

pub use mcp::{InstructionError, McpCall};

use crate::ids::{AgentId, StageRef, StepId, TaskId};
use crate::state::{ModelWait, TokenUsage};
use std::sync::Arc;

/// One LLM call made by one step.
#[derive(Clone, Debug)]
pub struct ChatRequest {
    /// The fixed part of the prompt (system section, role and permissions): the same for every
    /// step of the agent, sent as the `system` message.
    pub system: String,
    /// The rest of the prompt (history → memory entries, pending steps → current step), sent as
    /// the `user` message.
    pub prompt: String,
    /// The answer's shape as a JSON schema, for providers that can constrain the model by it.
    pub answer_format: Option<AnswerFormat>,
    /// Functions the model may call (the native tool loop: an MCP server's tools).
    pub tools: Vec<ToolSpec>,
    /// The loop's rounds so far: the calls the model asked for and what they returned.
    pub rounds: Vec<ToolRound>,
    /// Images the prompt's results refer to, sent beside the text to a model that takes images
    /// (its config says `multimodal: true`); none for any other (the prompt describes them).
    pub images: Vec<Arc<media::Blob>>,
    /// Who asks and for what, so providers can log and scripts can select a reply.
    pub agent_id: AgentId,
    /// The executor name of the step (a skill name).
    pub skill: String,
    /// The task the step belongs to.
    pub task_id: TaskId,
    /// The stage the step belongs to, or `no_relative`.
    pub stage_id: StageRef,
    /// The step making the call.
    pub step_id: StepId,
    /// The agent template the asking agent was created from, if any (scripts may key replies
    /// by template name for agents a manager creates).
    pub template: Option<String>,
    /// The step's intention and text: what the step asks for (scripts may choose a reply by
    /// it).
    pub step_text: String,
    /// Told the answer so far while a provider streams it.
    pub progress: Option<AnswerProgress>,
    /// Told when the call starts and stops waiting for its endpoint (see `llm::breaker`).
    pub model_wait: Option<ModelWaitReport>,
    /// How many unusable answers this step's model gave before this request (0 the first
    /// time). Where the repair policy has `reask_temperature` ([`Mending::hotter_retries`]), a
    /// provider samples more freely when asking again.
    pub retry: u32,
    /// What the provider may do about the model's slips while it answers (the repair policy's
    /// share of the call).
    pub mending: Mending,
    /// How many messages the asking agent had taken when the call was asked, and has when it
    /// is answered (see [`Intake`]). None: the caller counts none (a bench, a probe).
    pub intake: Option<Intake>,
}

/// How many messages an agent has taken so far (its actor counts each the first time it takes
/// it), shared with the agent's model calls, with the count when a call was asked (in the
/// same turn of the agent as the step that asks started, for a step's first call). A
/// recorded call keeps the count at its ask and at its answer; a replay gives the agent its
/// messages, its steps and its answers in that order again, so a message that reached the
/// agent during a call in the recorded run does so in the replay too, whatever the machine's
/// load does to the message's way (`llm::replay`).
#[derive(Clone, Debug, Default)]
pub struct Intake {
    count: Arc<std::sync::atomic::AtomicU64>,
    at_request: u64,
}

impl Intake {
    /// How many messages the agent has taken.
    pub fn taken(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How many it had taken when this call was asked (see [`Intake::for_request`]).
    pub fn at_request(&self) -> u64 {
        self.at_request
    }

    /// Counts one more message taken.
    pub fn took_one(&self) {
        self.count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// The same count, for a call asked now: it keeps how many were taken so far.
    pub fn for_request(&self) -> Intake {
        Intake {
            count: self.count.clone(),
            at_request: self.taken(),
        }
    }
}

/// What a provider may do about a model's slips while it answers, as the team's repair policy
/// (`policy::repairs`) allows: stop an answer that loops, sample more freely when asking again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mending {
    /// `loop_cut`: stop an answer that writes one passage again and again.
    pub loop_cut: Option<repetition::LoopLimits>,
    /// `reask_temperature`: each re-ask samples more freely.
    pub hotter_retries: bool,
}

impl Mending {
    /// What `repairs` allows a provider.
    pub fn of(repairs: &crate::policy::Repairs) -> Self {
        use crate::policy::Repair;
        let t = repairs.thresholds;
        Mending {
            loop_cut: repairs
                .allows(Repair::LoopCut)
                .then_some(repetition::LoopLimits {
                    times: t.loop_times,
                    span: t.loop_span,
                }),
            hotter_retries: repairs.allows(Repair::ReaskTemperature),
        }
    }
}

impl Default for Mending {
    /// As the default policy (`repairs: auto`) allows.
    fn default() -> Self {
        Mending::of(&crate::policy::Repairs::default())
    }
}

#[cfg(any(test, feature = "test-support"))]
impl ChatRequest {
    /// A request of `agent`'s `skill` step P1 in task T1, stage S1, with an empty prompt.
    pub fn test(agent: &str, skill: &str) -> Self {
        ChatRequest {
            system: String::new(),
            prompt: String::new(),
            answer_format: None,
            tools: Vec::new(),
            rounds: Vec::new(),
            images: Vec::new(),
            agent_id: agent.into(),
            skill: skill.into(),
            task_id: "T1".into(),
            stage_id: StageRef::Stage("S1".into()),
            step_id: "P1".into(),
            template: None,
            step_text: String::new(),
            progress: None,
            model_wait: None,
            retry: 0,
            mending: Mending::default(),
            intake: None,
        }
    }
}

/// Where a streamed answer's text goes while it is written (the agent publishes it, so the
/// console shows the answer growing). Called with the whole text so far, a few times a second
/// at most.
#[derive(Clone)]
pub struct AnswerProgress(Arc<dyn Fn(&str) + Send + Sync>);

impl AnswerProgress {
    /// Wraps the function that receives the answer so far.
    pub fn new(tell: impl Fn(&str) + Send + Sync + 'static) -> Self {
        AnswerProgress(std::sync::Arc::new(tell))
    }

    /// Passes on the whole answer text written so far.
    pub fn tell(&self, text_so_far: &str) {
        (self.0)(text_so_far)
    }
}

impl std::fmt::Debug for AnswerProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswerProgress")
    }
}

/// The JSON an answer must be when a provider constrains the model (`response_format:
/// json_schema`): an object with one property per answer tag of the skill (see
/// `skills::answer_schema`). The provider turns such an answer back into tagged text,
/// so every skill reads one format.
#[derive(Clone, Debug, PartialEq)]
pub struct AnswerFormat {
    /// The schema's name: the skill's name.
    pub name: String,
    /// The JSON schema the answer object must match.
    pub schema: serde_json::Value,
}

/// A function offered to the model: an MCP tool with its input schema.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The tool's name, which the model calls it by.
    pub name: String,
    /// What the tool does, as the server describes it (the model chooses tools by it).
    pub description: String,
    /// The JSON schema of the tool's arguments (its MCP input schema).
    pub parameters: serde_json::Value,
}

/// A call the model asked for: `arguments` is the JSON text it wrote.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call, which pairs the call's result with it in the next round.
    pub id: String,
    /// The tool to call.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, not yet parsed or checked.
    pub arguments: String,
}

/// One round of a tool loop: the model's calls (and any text with them), then each call's
/// result as the model is shown it, in the same order.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolRound {
    /// The text the model wrote along with its calls; often empty.
    pub text: String,
    /// The calls the model asked for.
    pub calls: Vec<ToolCall>,
    /// Each call's result as shown to the model, one per call in `calls`' order.
    pub results: Vec<String>,
}

/// The model's answer and what it cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatReply {
    /// The answer's text, which the step's skill parses.
    pub text: String,
    /// The tokens the call spent and their price.
    pub usage: TokenUsage,
    /// Why the text stops short of a whole answer, when it does.
    pub cut: Option<Cut>,
    /// Functions the model asked to call instead of (or besides) answering.
    pub tool_calls: Vec<ToolCall>,
}

/// Why an answer's text was cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cut {
    /// The model stopped at its token limit (`finish_reason: length`).
    TokenLimit,
    /// The model wrote the same passage again and again; the text keeps it once (a streamed
    /// answer is stopped there, see `repetition`).
    Repetition,
}

impl ChatReply {
    /// A whole answer the token limit cut off that ends in a loop keeps the passage once and is
    /// marked cut by repetition (the re-ask then says why it ran so long); an answer that ended
    /// by itself is left as it is.
    pub fn without_loop(mut self, limits: Option<repetition::LoopLimits>) -> Self {
        let Some(limits) = limits else { return self };
        if self.cut != Some(Cut::TokenLimit) {
            return self;
        }
        if let Some(at) = repetition::loop_start(&self.text, limits) {
            self.text.truncate(at);
            self.cut = Some(Cut::Repetition);
        }
        self
    }
}

/// Where a call says that its wait for the endpoint began (`Some`) or ended (`None`).
#[derive(Clone)]
pub struct ModelWaitReport(Arc<dyn Fn(Option<ModelWait>) + Send + Sync>);

impl ModelWaitReport {
    /// Wraps the function that receives the wait's start and end.
    pub fn new(tell: impl Fn(Option<ModelWait>) + Send + Sync + 'static) -> Self {
        ModelWaitReport(Arc::new(tell))
    }

    /// Tells the step its wait began (`Some`) or ended (`None`).
    pub fn tell(&self, wait: Option<ModelWait>) {
        (self.0)(wait)
    }
}

impl std::fmt::Debug for ModelWaitReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelWaitReport")
    }
}
