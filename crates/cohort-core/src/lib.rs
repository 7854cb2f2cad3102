//! # cohort-core — the pure core of Cohort
//!
//! Everything that decides, as plain functions on plain data: no async runtime, no actors, no
//! HTTP, no database (`cargo tree -p cohort-core` has no tokio, actix, axum or sqlx). The
//! runtime's actors only perform what these functions decide.
//!
//! # Map (lowest layer first)
//! - [`ids`], [`clock`], [`problem`], [`auth`]: newtype ids and `StageRef`, record timestamps,
//!   config problems, password and session-token hashes; [`lease`], how a node of a team
//!   across machines keeps its lease, and [`placement`], which node runs which agent.
//! - [`server_description`]: what an MCP server says it offers (its tools, their schemas and
//!   annotations, resources, prompts), typed from the MCP client on.
//! - [`policy`]: a tool call's risk, whether it waits for a person's approval, and the repair
//!   policy (every rule that mends a model's slip, named, counted and switchable).
//! - The model layer, whose types refer to each other by design:
//!   - [`state`]: the four kinds of state, the agent's step queue and lock, lifecycle enums,
//!     a step's typed origin and result, and the changes an agent makes to itself;
//!   - [`event`]: `Change` (one small typed event per change), the pure `apply` functions
//!     owners and readers share, and `States`, a reader's copy of the team;
//!   - [`message`]: `Message` with its typed body (a notice or a runtime instruction), and
//!     [`attachment`], the files a person attaches to one;
//!   - [`notice`]: the typed notices a task sends its manager, and their rendering;
//!   - [`report`]: an agent's completion report (its words, and what the runtime added).
//! - [`call`]: a model call and an MCP server call as data (request, reply, tool calls, what
//!   a provider may mend), made by `cohort-llm` and `cohort-mcp`.
//! - [`prompt`]: prompt files and the assembly of a skill's prompt from state.
//! - [`config`]: team files checked into `TeamConfig`, every problem naming its file and
//!   field; every default the layers above use.
//! - [`parse`]: the generic lenient reading of LLM answers: tags, JSON, fields, the memory
//!   block (total: never panics).
//! - [`skills`]: each skill as a folder behind one trait (`SkillKind`: its answer, schema,
//!   tags, history, effects), listed once in the registry `state::for_each_skill`.
//! - [`step`]: the agent's step machine: receiving messages, completing steps, people.
//! - [`team`]: SyncState's core (the team's tasks and stages): tasks and stages, execute outputs, instructions, ask_info,
//!   retention of finished tasks.

#![warn(missing_docs)]

pub mod attachment;
pub mod auth;
pub mod call;
pub mod clock;
pub mod config;
pub mod event;
pub mod ids;
pub mod lease;
pub mod message;
pub mod notice;
pub mod parse;
pub mod placement;
pub mod policy;
pub mod problem;
pub mod prompt;
pub mod report;
pub mod server_description;
pub mod skills;
pub mod state;
pub mod step;
pub mod team;
pub mod texts;
