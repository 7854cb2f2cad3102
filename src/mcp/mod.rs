//! Tools are MCP servers (SPEC §8): server configs (`config`), the one shared rmcp client of a
//! team (`client`), the argument check against a tool's input schema (`schema`), and the tool
//! step's instruction (`instruction`).

pub mod cli;
pub mod client;
pub mod config;
pub mod instruction;
mod process;
pub mod schema;

pub use client::{McpClient, McpError, McpOptions};
pub use config::{McpServerConfig, McpTransport, load_server, load_servers};
pub use instruction::McpCall;
