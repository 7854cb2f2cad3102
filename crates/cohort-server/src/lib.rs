//! # cohort-server — the HTTP face of a team
//!
//! # Map
//! - [`api`]: the axum router: the human REST API (login, send, conversations, approvals,
//!   control), paged states, the websocket monitor feed and the embedded web console, served
//!   connection by connection with deadlines and a connection cap.
//! - [`serve`]: `cohort serve`, a long-running team with its HTTP API until Ctrl-C / SIGTERM.
//! - [`node`]: `cohort serve --node`, one node of a team across machines: standing by, or
//!   running the team while it holds the team's lease.

// The modules of the crates below under their own names, so paths read `crate::state::…`
// here as they do in the core.
use cohort_core::{agent, attachment, auth, call, config, event, ids, message, state, sync};
use cohort_llm as llm;
use cohort_mcp as mcp;
use cohort_runtime::{actors, monitor, otel, run};
use cohort_store as store;

pub mod api;
pub mod node;
pub mod serve;
