//! The four kinds of state (task, stage, agent, step), the agent's step queue and the enums of
//! their lifecycles. Plain data with the transitions that belong to it; no I/O, no actors.

mod agent;
mod agent_changes;
mod agent_step;
mod ask;
mod choice;
mod enums;
mod executor;
mod held;
mod history_summary;
mod origin;
pub mod plan_check;
#[cfg(test)]
mod props;
mod result;
mod settings;
mod stage;
mod step;
mod step_limits;
mod step_lock;
mod task;
mod text_cap;

pub use agent::{
    AgentState, ConversationPool, HumanConfig, LlmSettings, MemoryOp, PrivateMessage,
    WorkingMemory, memory_key,
};
pub use agent_changes::{PRIVATE_BYTES_KEPT, PRIVATE_KEPT};
pub use agent_step::AgentStep;
pub use ask::{Ask, AskError, AskField, FieldKind, MAX_CHOICES, MAX_FIELDS};
pub use choice::{Choice, ChoiceError, chosen_model, offered_tools};
pub use enums::{ExecutionState, StageAgentState, StepExecutionState, WorkingState};
pub(crate) use executor::for_each_skill;
pub use executor::{Executor, Skill};
pub use held::{Held, value_bytes};
pub use history_summary::HistorySummary;
pub use origin::StepOrigin;
pub use result::{Cancelled, ELICITATION_KEY, PARAMS_KEY, StepResult, Try};
pub use settings::{Agent, AgentSettings};
pub use stage::StageState;
pub use step::{ModelWait, PlannedStep, ReplyTo, StepState, TokenUsage};
pub use step_limits::StepLimits;
pub use step_lock::{StepLock, Wait, WaitPatience};
pub use task::{ConversationEntry, FailedStage, ForkedFrom, SharedInfo, TaskEnd, TaskState};
pub use text_cap::{DEFAULT_STEP_CHARS, cap_str, cap_value};
