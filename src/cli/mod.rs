//! The command line's pieces besides argument parsing (which stays in `main.rs`): the
//! `check` and `run` commands, the store flags with `inspect` / `export`, a node of a team
//! across machines, how output reaches a person, and attached files (`run --attach`, and the
//! shelf a bundled server reads them from).

pub mod attach;
pub mod check;
pub mod data;
pub mod eval_cmd;
pub mod node;
pub mod output;
pub mod replay_cmd;
pub mod run_cmd;
pub mod shelf;
