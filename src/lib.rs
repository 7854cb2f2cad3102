//! # Cohort — an actor-based multi-agent runtime
//!
//! This package is the `cohort` binary (CLI and `cohort bench`) and, as a library, one door to
//! the workspace's crates under the module names they had in one crate, so a program (or a
//! test) can write `cohort::state::…` or `cohort::actors::…`:
//!
//! | crate | modules |
//! |---|---|
//! | `cohort-core` | [`ids`], [`clock`], [`problem`], [`auth`], [`policy`], [`state`], [`event`], [`message`], [`notice`], [`call`], [`server_description`], [`prompt`], [`config`], [`parse`], [`skills`], [`step`], [`team`] |
//! | `cohort-llm` | [`llm`] |
//! | `cohort-mcp` | [`mcp`] |
//! | `cohort-mcp-servers` | [`bundled`] |
//! | `cohort-store` | [`store`] |
//! | `cohort-runtime` | [`actors`], [`monitor`], [`run`] |
//! | `cohort-server` | [`api`], [`serve`] |
//! | `cohort` (this one) | [`bench`](mod@bench), [`eval`] |
//!
//! docs/architecture.md draws how they stack.

pub use cohort_core::{
    attachment, auth, call, clock, config, event, ids, lease, message, notice, parse, policy,
    problem, prompt, server_description, skills, state, step, team,
};
pub use cohort_llm as llm;
pub use cohort_mcp as mcp;
pub use cohort_mcp_servers as bundled;
pub use cohort_runtime::{actors, monitor, otel, run};
pub use cohort_server::{api, node, serve};
pub use cohort_store as store;

pub mod bench;
pub mod eval;
