//! LLM providers behind one trait: `openai` (async-openai against any OpenAI-compatible
//! endpoint) and `scripted` (replies from a YAML script, for offline runs and tests); and a
//! recorded run's calls served again (`replay`).

pub mod breaker;
pub mod fork;
pub mod limit;
pub mod openai;
pub mod priced;
pub mod recorded;
pub mod replay;
pub mod scripted;

pub use cohort_core::call::{
    AnswerFormat, AnswerProgress, ChatReply, ChatRequest, Cut, Intake, Mending, ModelWaitReport,
    ToolCall, ToolRound, ToolSpec, repetition, structured,
};
use cohort_core::ids::AgentId;
use futures::future::BoxFuture;
use std::time::Duration;

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
    #[error("replay: {0}")]
    Replay(String),
}

/// A chat model. The returned future owns everything it needs, so an agent actor can spawn it
/// and keep handling messages while the call runs.
/// The [`ChatModel`] methods of a model that wraps another (`self.inner`) and only changes how
/// `chat` is done: everything else is the inner model's.
macro_rules! delegate_to_inner {
    () => {
        fn carry_on(&self, answered: &[$crate::Answered]) {
            self.inner.carry_on(answered);
        }

        fn prompt_budget(&self) -> Option<usize> {
            self.inner.prompt_budget()
        }

        fn native_tools(&self) -> bool {
            self.inner.native_tools()
        }

        fn takes_images(&self) -> bool {
            self.inner.takes_images()
        }

        fn constrains_answers(&self) -> bool {
            self.inner.constrains_answers()
        }

        fn token_counter(&self) -> ::cohort_core::prompt::tokens::TokenCounter {
            self.inner.token_counter()
        }
    };
}
pub(crate) use delegate_to_inner;

pub trait ChatModel: Send + Sync + 'static {
    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>>;

    /// A team carried over from a store tells its models which calls were answered before
    /// (a model with state of its own, like a script's place, carries on from there). Told
    /// again for the same agents (one that comes back from another node of the team), it
    /// carries on from the newer count, not from both.
    fn carry_on(&self, _answered: &[Answered]) {}

    /// The most tokens a prompt may take (the context window less the answer's room), when
    /// the model's config states a context window.
    /// How this model's tokens are counted: its own tokenizer when known, else an estimate.
    fn token_counter(&self) -> cohort_core::prompt::tokens::TokenCounter {
        cohort_core::prompt::tokens::TokenCounter::Estimate
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

    /// Whether this model takes images (its config says `multimodal: true`): a request's
    /// [`images`](ChatRequest::images) are filled for it only.
    fn takes_images(&self) -> bool {
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
