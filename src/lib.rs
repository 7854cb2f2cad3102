//! # Cohort — an actor-based multi-agent runtime
//!
//! # Layout
//! - [`ids`]: newtype ids (`TaskId`, `StageId`, `AgentId`, `StepId`, `WaitId`) and `StageRef`.
//! - [`state`]: the four kinds of state, the agent's step queue, lifecycle enums.
//! - [`message`]: `Message`, runtime `<instruction>`s, `ExecuteOutput`.

pub mod ids;
pub mod message;
pub mod state;
pub mod llm;
pub mod parse;
pub mod prompt;
pub mod actors;
pub mod agent;
pub mod config;
pub mod monitor;
pub mod skills;
pub mod sync;
pub mod run;
