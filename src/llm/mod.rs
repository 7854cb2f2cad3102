//! LLM providers behind one trait: `openai` (async-openai against any OpenAI-compatible
//! endpoint) and `scripted` (replies from a YAML script, for offline runs and tests).

pub mod limit;
pub mod openai;
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
}

/// The JSON an answer must be when a provider constrains the model (`response_format:
/// json_schema`): an object with one property per answer tag of the skill (see
/// [`crate::skills::answer_schema`]). The provider turns such an answer back into tagged text,
/// so every skill reads one format.
#[derive(Clone, Debug, PartialEq)]
pub struct AnswerFormat {
    /// The schema's name: the skill's name.
    pub name: String,
    pub schema: serde_json::Value,
    /// Said in the system message when the answer is constrained: the tags become keys.
    pub note: String,
}

/// The model's answer and what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatReply {
    pub text: String,
    pub usage: TokenUsage,
    /// The model stopped at its token limit (`finish_reason: length`): the text is cut off.
    pub cut_off: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("the LLM endpoint answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    #[error("the LLM endpoint kept rate-limiting (HTTP 429) after {attempts} attempts: {body}")]
    RateLimited { attempts: u32, body: String },
    #[error("the LLM call timed out after {0:?}")]
    Timeout(Duration),
    #[error("could not reach the LLM endpoint: {0}")]
    Connection(String),
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
pub trait ChatModel: Send + Sync + 'static {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>>;

    /// A team carried over from a store tells its models which calls were answered before
    /// (a model with state of its own, like a script's place, carries on from there).
    fn carry_on(&self, _answered: &[Answered]) {}

    /// The most tokens a prompt may take (the context window less the answer's room), when
    /// the model's config states a context window.
    fn prompt_budget(&self) -> Option<usize> {
        None
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
