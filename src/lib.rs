//! # Cohort — an actor-based multi-agent runtime
//!
//! # Layout
//! - [`ids`]: newtype ids (`TaskId`, `StageId`, `AgentId`, `StepId`, `WaitId`) and `StageRef`.
//! - [`state`]: the four kinds of state, the agent's step queue, lifecycle enums.
//! - [`message`]: `Message`, runtime `<instruction>`s, `ExecuteOutput`.

pub mod actors;
pub mod agent;
pub mod api;
pub mod auth;
pub mod bench;
#[path = "../mcp_servers/src/mod.rs"]
pub mod bundled;
pub mod clock;
pub mod config;
pub mod event;
pub mod ids;
pub mod llm;
pub mod mcp;
pub mod message;
pub mod monitor;
pub mod parse;
pub mod problem;
pub mod prompt;
pub mod run;
pub mod serve;
pub mod skills;
pub mod state;
pub mod sync;
