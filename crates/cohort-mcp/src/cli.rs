//! What `cohort mcp describe|call` do, for people debugging a server: load one server file,
//! talk to it through the same client the runtime uses, and shut it down again.

use super::client::{McpClient, McpOptions};
use super::{McpCall, load_server};
use cohort_core::server_description::ServerDescription;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
    Config(Vec<cohort_core::problem::Problem>),
    #[error("--args is not a JSON object: {0}")]
    Args(String),
    #[error("give one of --tool, --resource or --prompt")]
    NoCapability,
    #[error(transparent)]
    Mcp(#[from] super::client::McpError),
}

/// Where a command reads the variables a server's `pass_env` names.
pub type Vars<'a> = &'a dyn Fn(&str) -> Option<String>;

async fn with_server<T>(
    file: &Path,
    (opts, vars): (McpOptions, Vars<'_>),
    f: impl AsyncFnOnce(&McpClient, &str) -> Result<T, CliError>,
) -> Result<T, CliError> {
    let server = load_server(file).map_err(CliError::Config)?;
    let opts = opts.passing_env_of(std::slice::from_ref(&server), vars);
    let name = server.name.clone();
    let client = McpClient::new(vec![server], opts);
    let out = f(&client, &name).await;
    client.shutdown().await;
    out
}

/// The server's tools, resources, resource templates and prompts.
pub async fn describe(
    file: &Path,
    opts: McpOptions,
    vars: Vars<'_>,
) -> Result<Arc<ServerDescription>, CliError> {
    with_server(file, (opts, vars), async |c, name| {
        Ok(c.describe(name).await?)
    })
    .await
}

/// One call; the server's full answer.
pub async fn call(
    file: &Path,
    (opts, vars): (McpOptions, Vars<'_>),
    call: &McpCall,
) -> Result<Value, CliError> {
    with_server(file, (opts, vars), async |c, name| {
        Ok(c.call(name, call).await?)
    })
    .await
}

/// The call the command-line flags describe.
pub fn call_from_flags(
    tool: Option<String>,
    resource: Option<String>,
    prompt: Option<String>,
    args: &str,
) -> Result<McpCall, CliError> {
    let arguments: Map<String, Value> = match serde_json::from_str::<Value>(args) {
        Ok(Value::Object(m)) => m,
        Ok(other) => return Err(CliError::Args(format!("got {other}"))),
        Err(e) => return Err(CliError::Args(e.to_string())),
    };
    match (tool, resource, prompt) {
        (Some(name), _, _) => Ok(McpCall::Tool { name, arguments }),
        (_, Some(uri), _) => Ok(McpCall::Resource { uri }),
        (_, _, Some(name)) => Ok(McpCall::Prompt { name, arguments }),
        _ => Err(CliError::NoCapability),
    }
}
