//! LLM providers behind one trait: `openai` (async-openai against any OpenAI-compatible
//! endpoint) and `scripted` (replies from a YAML script, for offline runs and tests).

pub mod breaker;
pub mod limit;
pub mod openai;
pub mod priced;
pub mod recorded;
pub mod repetition;
pub mod scripted;
pub mod structured;

use crate::ids::{AgentId, StageRef, StepId, TaskId};
use crate::state::TokenUsage;
use futures::future::BoxFuture;
use std::time::Duration;

/// One LLM call made by one step.
#[derive(Clone, Debug)]
pub struct ChatRequest {
    /// The fixed part of the prompt (system section, role and permissions): the same for every
    /// step of the agent, sent as the `system` message.
    pub system: String,
    /// The rest of the prompt (current step → history → memory), sent as the `user` message.
    pub prompt: String,
    /// The answer's shape as a JSON schema, for providers that can constrain the model by it.
    pub answer_format: Option<AnswerFormat>,
    /// Functions the model may call (the native tool loop: an MCP server's tools).
    pub tools: Vec<ToolSpec>,
    /// The loop's rounds so far: the calls the model asked for and what they returned.
    pub rounds: Vec<ToolRound>,
    /// Who asks and for what, so providers can log and scripts can select a reply.
    pub agent_id: AgentId,
    /// The executor name of the step (a skill name).
    pub skill: String,
    pub task_id: TaskId,
    pub stage_id: StageRef,
    pub step_id: StepId,
    /// The agent template the asking agent was created from, if any (scripts may key replies
    /// by template name for agents a manager creates).
    pub template: Option<String>,
    /// The step's intention and text: what the step asks for (scripts may choose a reply by
    /// it).
    pub step_text: String,
    /// Told the answer so far while a provider streams it.
    pub progress: Option<AnswerProgress>,
    /// Told when the call starts and stops waiting for its endpoint (see [`breaker`]).
    pub model_wait: Option<breaker::ModelWaitReport>,
    /// How many unusable answers this step's model gave before this request (0 the first
    /// time). A provider may sample more freely when asking again: the same prompt at the same
    /// temperature tends to give the same unusable answer (a small model stuck repeating).
    pub retry: u32,
    /// What the provider may do about the model's slips while it answers (the repair policy's
    /// share of the call).
    pub mending: Mending,
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

#[cfg(test)]
impl ChatRequest {
    /// A request of `agent`'s `skill` step P1 in task T1, stage S1, with an empty prompt.
    pub(crate) fn test(agent: &str, skill: &str) -> Self {
        ChatRequest {
            system: String::new(),
            prompt: String::new(),
            answer_format: None,
            tools: Vec::new(),
            rounds: Vec::new(),
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
        }
    }
}

/// Where a streamed answer's text goes while it is written (the agent publishes it, so the
/// console shows the answer growing). Called with the whole text so far, a few times a second
/// at most.
#[derive(Clone)]
pub struct AnswerProgress(std::sync::Arc<dyn Fn(&str) + Send + Sync>);

impl AnswerProgress {
    pub fn new(tell: impl Fn(&str) + Send + Sync + 'static) -> Self {
        AnswerProgress(std::sync::Arc::new(tell))
    }

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
    pub schema: serde_json::Value,
    /// Said in the system message when the answer is constrained: the tags become keys.
    pub note: String,
}

/// A function offered to the model: an MCP tool with its input schema.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// A call the model asked for: `arguments` is the JSON text it wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One round of a tool loop: the model's calls (and any text with them), then each call's
/// result as the model is shown it, in the same order.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolRound {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub results: Vec<String>,
}

/// The model's answer and what it cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatReply {
    pub text: String,
    pub usage: TokenUsage,
    /// Why the text stops short of a whole answer, when it does.
    pub cut: Option<Cut>,
    /// Functions the model asked to call instead of (or besides) answering.
    pub tool_calls: Vec<ToolCall>,
}

/// Why an answer's text was cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
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

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("the LLM endpoint answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    #[error("the prompt is longer than the model's context window ({window} tokens): {body}")]
    ContextExceeded { window: u32, body: String },
    #[error("the LLM endpoint kept rate-limiting (HTTP 429) after {attempts} attempts: {body}")]
    RateLimited { attempts: u32, body: String },
    #[error("the LLM call timed out after {0:?}")]
    Timeout(Duration),
    #[error("the LLM endpoint sent nothing for {0:?} while streaming the answer")]
    Stalled(Duration),
    #[error("could not reach the LLM endpoint: {0}")]
    Connection(String),
    #[error(
        "the model endpoint did not answer for {} s, the most a step waits for it \
         (waits.model_secs); last: {last}", waited.as_secs()
    )]
    EndpointDown { waited: Duration, last: String },
    #[error("the LLM endpoint sent an answer without text: {0}")]
    EmptyAnswer(String),
    #[error("the LLM endpoint answered 2xx with a body that is not a chat completion: {0}")]
    InvalidResponse(String),
    #[error("invalid LLM provider settings: {0}")]
    InvalidSettings(String),
    #[error("environment variable {0} (the API key the config names) is not set")]
    MissingApiKey(String),
    #[error("no model name: set the environment variable {0} or `model` in the config")]
    MissingModel(String),
    #[error("the script has no reply left for agent `{agent}` skill `{skill}` (it had {used})")]
    ScriptExhausted {
        agent: String,
        skill: String,
        used: usize,
    },
    #[error("script: {0}")]
    Script(String),
}

/// A chat model. The returned future owns everything it needs, so an agent actor can spawn it
/// and keep handling messages while the call runs.
/// The [`ChatModel`] methods of a model that wraps another (`self.inner`) and only changes how
/// `chat` is done: everything else is the inner model's.
macro_rules! delegate_to_inner {
    () => {
        fn carry_on(&self, answered: &[$crate::llm::Answered]) {
            self.inner.carry_on(answered);
        }

        fn prompt_budget(&self) -> Option<usize> {
            self.inner.prompt_budget()
        }

        fn native_tools(&self) -> bool {
            self.inner.native_tools()
        }

        fn constrains_answers(&self) -> bool {
            self.inner.constrains_answers()
        }

        fn token_counter(&self) -> $crate::prompt::tokens::TokenCounter {
            self.inner.token_counter()
        }
    };
}
pub(crate) use delegate_to_inner;

pub trait ChatModel: Send + Sync + 'static {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>>;

    /// A team carried over from a store tells its models which calls were answered before
    /// (a model with state of its own, like a script's place, carries on from there).
    fn carry_on(&self, _answered: &[Answered]) {}

    /// The most tokens a prompt may take (the context window less the answer's room), when
    /// the model's config states a context window.
    /// How this model's tokens are counted: its own tokenizer when known, else an estimate.
    fn token_counter(&self) -> crate::prompt::tokens::TokenCounter {
        crate::prompt::tokens::TokenCounter::Estimate
    }

    fn prompt_budget(&self) -> Option<usize> {
        None
    }

    /// Whether this model may constrain an answer by its schema: the asker only builds an
    /// [`AnswerFormat`] when it does (a schema per step is work a script never uses).
    fn constrains_answers(&self) -> bool {
        false
    }

    /// Whether tool steps run the native tool loop with this model (its config says
    /// `tool_calling: native`): the model calls the server's functions itself.
    fn native_tools(&self) -> bool {
        false
    }
}

/// A call a stored step shows was answered: who asked, with which skill, for what step.
#[derive(Clone, Debug, PartialEq)]
pub struct Answered {
    pub agent_id: AgentId,
    pub template: Option<String>,
    pub skill: String,
    /// As in [`ChatRequest::step_text`].
    pub step_text: String,
}
