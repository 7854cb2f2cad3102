//! # Cohort — an actor-based multi-agent runtime
//!
//! # Layout
//! - [`ids`]: newtype ids (`TaskId`, `StageId`, `AgentId`, `StepId`, `WaitId`) and `StageRef`.
//! - [`state`]: the four kinds of state, the agent's step queue and lock, lifecycle enums, and
//!   the changes an agent makes to itself.
//! - [`event`]: the core vocabulary of change: `Change` (one small typed event per change to a
//!   task, stage, agent or step), the pure `apply` functions owners and readers share, and
//!   `States`, a reader's copy of the team.
//! - [`message`]: `Message` with its typed body (a notice or a runtime instruction),
//!   `ExecuteOutput`.
//! - [`notice`]: the typed notices a task sends its manager, and their rendering.
//! - [`config`]: team files (agents, templates, people, LLMs, retention) checked into
//!   `TeamConfig`, every problem naming its file and field.
//! - [`prompt`]: prompt files and the assembly of a skill's prompt from state (pure).
//! - [`parse`]: LLM answers into typed skill answers (pure, total).
//! - [`policy`]: a tool call's risk and whether it waits for a person's approval (pure).
//! - [`skills`]: each skill's interpretation of its answer.
//! - [`agent`]: the agent's step machine: receiving messages, completing steps, humans.
//! - [`sync`]: SyncState's core: tasks and stages, execute outputs, instructions, ask_info,
//!   retention of finished tasks.
//! - [`actors`]: thin actix shells: agents (on one arbiter per core), SyncState, the
//!   Dispatcher, the Supervisor, and the System that wires a team.
//! - [`monitor`]: the reader everything reads through: versions, states, broadcast, snapshots.
//! - [`store`]: durability: the event log and snapshots on SQLite or Postgres (sqlx).
//! - [`call`]: a model call and an MCP server call as data (request, reply, tool calls, what
//!   the provider may mend), read and written by the step machine; made by `llm` and `mcp`.
//! - [`llm`]: the `ChatModel` trait, the openai and scripted providers, the in-flight cap.
//! - [`mcp`]: the one shared MCP client; [`bundled`]: the MCP servers shipped in the binary.
//! - [`api`]: the axum router: human REST API, paged states, the websocket feed.
//! - [`run`]: `cohort run`, following the change stream to the goal's end.
//! - [`serve`]: `cohort serve`, the long-running team with its HTTP API.
//! - [`bench`]: `cohort bench`, every benchmark scenario and its table.
//! - [`auth`], [`clock`], [`problem`]: password hashes, record timestamps, config problems.

pub mod actors;
// Clippy (1.95) asks for let-chains where an `if let` holds an `if`. In the modules being
// rewritten now (the typed core: agent, event, sync; the agent actor) that is left to their
// rewrite rather than re-indented under it; drop these allows once it has landed.
pub mod agent;
pub mod api;
pub mod auth;
pub mod bench;
#[path = "../mcp_servers/src/mod.rs"]
pub mod bundled;
pub mod call;
pub mod clock;
pub mod config;
pub mod event;
pub mod ids;
pub mod llm;
pub mod mcp;
pub mod message;
pub mod monitor;
pub mod notice;
pub mod parse;
pub mod policy;
pub mod problem;
pub mod prompt;
pub mod run;
pub mod serve;
pub mod skills;
pub mod state;
pub mod store;
pub mod sync;
