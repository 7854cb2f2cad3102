//! A node of a team across machines (`cohort serve --node NAME`).
//!
//! - [`lease`]: waiting for the team's lease, and keeping it (renewals, and knowing when the
//!   node may no longer act on it).
//! - [`bus`]: the node's NATS connection: where, its credentials and TLS, and the subjects and
//!   streams of its team.
//! - [`relay`]: every change the store commits, published to the team's JetStream event
//!   stream, in order and each once.

pub mod bus;
pub mod lease;
pub mod relay;

pub use lease::{Keeper, wait_for_lease};
