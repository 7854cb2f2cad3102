//! A node of a team across machines (`cohort serve --node NAME`).
//!
//! - [`lease`]: waiting for the team's lease, and keeping it (renewals, and knowing when the
//!   node may no longer act on it).
//! - [`bus`]: the node's NATS connection: where, its credentials and TLS, and the subjects and
//!   streams of its team.
//! - [`relay`]: every change the store commits, published to the team's JetStream event
//!   stream, in order and each once.
//! - [`wire`]: what the team's node and the nodes that run agents for it say to each other;
//!   [`link`]: saying it over NATS, in order, each call with its answer and a deadline;
//!   [`inbox`]: the messages of an agent on another node, through a JetStream consumer of its
//!   own.
//! - On the team's node: [`placer`], which node runs which agent, and moving one;
//!   [`stand_in`], an agent elsewhere in the dispatcher's eyes; [`core_calls`], taking the
//!   calls of agents elsewhere (under their leases) to SyncState and the monitor.
//! - On the others: [`host`], running the agents the team's node placed there, and
//!   [`follower`], the team's states kept from the event stream for the node's own feeds
//!   (and [`writing`], the answers being written, passed on to them).

pub mod bus;
pub mod core_calls;
pub mod follower;
pub mod host;
pub mod inbox;
pub mod lease;
pub mod link;
pub mod placer;
pub mod relay;
pub mod stand_in;
pub mod wire;
pub mod writing;

pub use lease::{Keeper, wait_for_lease};
