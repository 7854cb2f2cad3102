//! The agent's step machine as plain functions on an `Agent` (its state and settings): how a
//! message becomes steps (`receive`), and how a finished LLM call becomes a finished or failed
//! step plus the `ExecuteOutput` for SyncState (`complete`). The actor in `actors/agent/` only
//! performs the effects these return.

pub mod approval;
pub mod cancel;
mod complete;
pub mod dependencies;
pub mod elicitation;
pub mod history_summary;
mod human;
mod limits;
pub mod params;
pub mod plan_check;
mod reask;
mod receive;
mod resume;
pub mod risk_judge;
mod settle;
mod tool_call;
mod tool_history;
pub mod tool_loop;
pub mod tool_refusal;
mod waits;

pub use complete::{
    Completion, FollowUp, StepCompletion, act_again_after_refusal, complete_step,
    complete_tool_loop, complete_tool_step, complete_tool_step_after, stop_step,
};
pub use human::{
    HumanError, HumanMessage, MAX_WAIT_SECS, gives_a_goal, human_send, receive_as_human,
};
pub use limits::stop_reason;
pub use reask::Asking;
pub use receive::{Received, asks_to_act, receive_message};
pub use resume::{interrupted_tool_call, interrupted_tool_steps, resume_after_restart};
pub use settle::{Settle, release_for, settle_step};
pub use tool_call::{ToolAttempts, tool_call_for};
pub use tool_history::tool_chain;
pub use waits::expire_waits;
