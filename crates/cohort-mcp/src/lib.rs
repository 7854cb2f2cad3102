//! Tools are MCP servers (SPEC §8): server configs (`cohort_core::config::mcp_servers`), the
//! one shared rmcp client of a team (`client`), a server's typed description asked of it
//! (`describe`, into `cohort_core::server_description`), the older HTTP+SSE transport rmcp lacks
//! (`sse`), a streamable HTTP session used only once its standalone stream is open
//! (`standalone`), the argument check against a tool's input schema (`schema`), and the tool
//! step's call (`cohort_core::call::McpCall`).

mod cache;
pub mod cli;
pub mod client;
pub mod conformance;
mod describe;
pub mod elicit;

pub mod oauth;
mod process;
pub mod replay;
pub mod schema;
pub mod sse;
mod standalone;

pub use client::{McpClient, McpError, McpOptions};
pub use cohort_core::call::McpCall;
pub use cohort_core::config::mcp_servers::{
    HttpFlavor, McpServerConfig, McpTransport, load_server, load_servers,
};
