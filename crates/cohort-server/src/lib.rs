//! # cohort-server — the HTTP face of a team
//!
//! # Map
//! - [`api`]: the axum router: the human REST API (login, send, conversations, approvals,
//!   control), paged states, the websocket monitor feed and the embedded web console, served
//!   connection by connection with deadlines and a connection cap.
//! - [`serve`]: `cohort serve`, a long-running team with its HTTP API until Ctrl-C / SIGTERM.
//! - [`node`]: `cohort serve --node`, one node of a team across machines: standing by, or
//!   running the team while it holds the team's lease.

pub mod api;
pub mod node;
pub mod serve;
