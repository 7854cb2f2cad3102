//! # cohort-runtime — the actors that run a team
//!
//! Thin actix shells that perform what `cohort-core` decides, and the monitor everything reads
//! the team through.
//!
//! # Map
//! - [`actors`]: one actor per agent (on one arbiter per core), SyncState (owner of tasks and
//!   stages), the Dispatcher (routes messages in order), the Supervisor (starts hired agents),
//!   and the System that wires a team from its config, model clients, MCP client and store.
//! - [`monitor`]: the reader of the change stream: versions, `States`, broadcast to live
//!   subscribers, the journal to the store, snapshots and compaction.
//! - [`run`]: `cohort run`, following the change stream to the goal's end.
//! - [`node`]: a node of a team across machines, waiting for the team's lease and keeping it.
//! - [`otel`]: traces out over OpenTelemetry (OTLP) when the standard variables ask for them.

pub mod actors;
pub mod monitor;
pub mod node;
pub mod otel;
pub mod run;
