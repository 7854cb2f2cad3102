//! The command line's pieces besides argument parsing (which stays in `main.rs`): the
//! `check` and `run` commands, the store flags with `inspect` / `export`, the NATS flags of a
//! node, and how output
//! reaches a person.

pub mod check;
pub mod data;
pub mod nats;
pub mod output;
pub mod run_cmd;
