//! Tools are MCP servers (SPEC §8): server configs (`config::mcp_servers`), the one shared rmcp client of a
//! team (`client`), the older HTTP+SSE transport rmcp lacks (`sse`), the argument check
//! against a tool's input schema (`schema`), and the tool step's call (`call::McpCall`).

// The core's modules under their own names, so paths here read as they do in the core.
use cohort_core::{agent, call, config, policy, problem};

mod cache;
pub mod cli;
pub mod client;
pub mod conformance;
pub mod elicit;

pub mod oauth;
mod process;
pub mod replay;
pub mod schema;
pub mod sse;

pub use crate::call::McpCall;
pub use crate::config::mcp_servers::{
    HttpFlavor, McpServerConfig, McpTransport, load_server, load_servers,
};
pub use client::{McpClient, McpError, McpOptions, ToolInfo};
