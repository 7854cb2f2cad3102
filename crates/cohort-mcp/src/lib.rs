//! Tools are MCP servers (SPEC §8): server configs (`config::mcp_servers`), the one shared rmcp client of a
//! team (`client`), the argument check against a tool's input schema (`schema`), and the tool
//! step's call (`call::McpCall`).

// The core's modules under their own names, so paths here read as they do in the core.
use cohort_core::{call, config, policy, problem};

pub mod cli;
pub mod client;

mod process;
pub mod schema;

pub use crate::call::McpCall;
pub use crate::config::mcp_servers::{McpServerConfig, McpTransport, load_server, load_servers};
pub use client::{McpClient, McpError, McpOptions};
