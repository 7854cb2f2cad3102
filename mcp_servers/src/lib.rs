//! The MCP servers shipped inside the `cohort` binary (`builtin: NAME` in `mcp_servers/*.yaml`,
//! run as `cohort mcp serve NAME -- ARGS…`), written with rmcp's server macros and runnable
//! offline.
//!
//! # Layout
//! - [`sandbox`]: confines a path to one root folder (lexical rules, then symlink-aware checks).
//! - [`uri`]: the `SCHEME:///percent-encoded-name` resource URIs.
//! - [`workspace_fs`]: the workspace's file operations as plain blocking functions.
//! - [`workspace`]: the `workspace` server (tools, resources, `review_file` prompt).
//! - [`attachments`]: the files people attached, as `read_attachment` reads them from a
//!   [`Shelf`](attachments::Shelf) on the team's store.
//! - [`notes_store`]: the notes and their atomically written JSON file.
//! - [`notes`]: the `notes` server (tools, resources, `recall_notes` prompt).
//! - [`web_fetch`]: which hosts may be fetched, fetching within limits, a page as text.
//! - [`web_search`]: the search APIs (SearXNG, Brave, Tavily) and their answers.
//! - [`web`]: the `web` server (`web_search`, `fetch_url`) and its arguments.
//! - this file: argument parsing and the two transports (stdio, streamable HTTP at `/mcp`).
//!
//! Logging: rmcp and these servers log with `tracing`; the caller's subscriber must write to
//! stderr, because over stdio, stdout carries the protocol.

pub mod attachments;
pub mod notes;
pub mod notes_store;
pub mod sandbox;
pub mod uri;
pub mod web;
pub mod web_fetch;
pub mod web_search;
pub mod workspace;
pub mod workspace_fs;

pub use notes::NotesServer;
pub use notes_store::{NotesError, NotesStore};
pub use sandbox::{Sandbox, SandboxError};
pub use web::{WebArgs, WebServer};
pub use workspace::WorkspaceServer;

use cohort_core::config::mcp_servers::BUILTIN_SERVERS;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt};
use std::path::{Path, PathBuf};

/// Everything that can stop a bundled server.
#[derive(Debug, thiserror::Error)]
pub enum BundledError {
    #[error("no bundled MCP server `{name}` (there are: {})", BUILTIN_SERVERS.join(", "))]
    UnknownServer { name: String },
    #[error("{server}: {message} (usage: {usage})")]
    Args {
        server: &'static str,
        message: String,
        usage: &'static str,
    },
    #[error("cannot determine the current directory: {0}")]
    Cwd(std::io::Error),
    #[error("workspace root {} cannot be used: {source}", path.display())]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Notes(#[from] NotesError),
    /// Boxed: rmcp's error is large and would bloat every `Result` here.
    #[error("MCP handshake failed: {0}")]
    Handshake(Box<rmcp::service::ServerInitializeError>),
    #[error("the MCP session ended abnormally: {0}")]
    Session(#[from] tokio::task::JoinError),
    #[error("the HTTP server failed: {0}")]
    Http(std::io::Error),
}

/// Which bundled server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BundledKind {
    /// Files inside one root folder (`--root DIR`).
    Workspace,
    /// Key-value notes in one JSON file (`--file PATH`).
    Notes,
}

impl BundledKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::Notes => "notes",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Self::Workspace => "--root",
            Self::Notes => "--file",
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Self::Workspace => "workspace --root DIR",
            Self::Notes => "notes --file PATH",
        }
    }
}

/// A bundled server's arguments, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct BundledArgs {
    pub kind: BundledKind,
    /// `--root` (workspace) or `--file` (notes), made absolute.
    pub path: PathBuf,
}

impl BundledArgs {
    /// Parses `args` for server `name`; relative paths resolve against the current directory.
    pub fn parse(name: &str, args: &[String]) -> Result<Self, BundledError> {
        let cwd = std::env::current_dir().map_err(BundledError::Cwd)?;
        Self::parse_in(name, args, &cwd)
    }

    /// [`parse`](Self::parse) with the directory relative paths resolve against.
    pub fn parse_in(name: &str, args: &[String], cwd: &Path) -> Result<Self, BundledError> {
        let kind = match name {
            "workspace" => BundledKind::Workspace,
            "notes" => BundledKind::Notes,
            _ => {
                return Err(BundledError::UnknownServer { name: name.into() });
            }
        };
        let flag = kind.flag();
        let wrong = |message: String| BundledError::Args {
            server: kind.name(),
            message,
            usage: kind.usage(),
        };
        let mut value: Option<String> = None;
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let given = if arg == flag {
                rest.next()
                    .ok_or_else(|| wrong(format!("`{flag}` needs a value")))?
                    .clone()
            } else if let Some(v) = arg.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                v.to_owned()
            } else {
                return Err(wrong(format!("unexpected argument `{arg}`")));
            };
            if value.is_some() {
                return Err(wrong(format!("`{flag}` is given twice")));
            }
            if given.is_empty() {
                return Err(wrong(format!("`{flag}` is empty")));
            }
            value = Some(given);
        }
        let value = value.ok_or_else(|| wrong(format!("`{flag}` is required")))?;
        Ok(Self {
            kind,
            path: cwd.join(value),
        })
    }
}

/// A built server: the one type the transports below are written over for each.
enum Built {
    Workspace(WorkspaceServer),
    Notes(NotesServer),
    Web(WebServer),
}

/// Where the workspace server reads attached files from, if the team has a store.
pub type SharedShelf = Option<std::sync::Arc<dyn attachments::Shelf>>;

fn build(name: &str, args: &[String], shelf: SharedShelf) -> Result<Built, BundledError> {
    if name == "web" {
        let vars = |k: &str| std::env::var(k).ok();
        let server = WebServer::new(WebArgs::parse(args)?, &vars)?;
        tracing::info!("web MCP server ready");
        return Ok(Built::Web(server));
    }
    let args = BundledArgs::parse(name, args)?;
    Ok(match args.kind {
        BundledKind::Workspace => {
            let server = WorkspaceServer::new(&args.path)
                .map_err(|source| BundledError::Root {
                    path: args.path.clone(),
                    source,
                })?
                .with_attachments(shelf);
            tracing::info!(root = %server.root().display(), "workspace MCP server ready");
            Built::Workspace(server)
        }
        BundledKind::Notes => {
            let server = NotesServer::open(&args.path)?;
            tracing::info!(file = %args.path.display(), "notes MCP server ready");
            Built::Notes(server)
        }
    })
}

/// Serves bundled server `name` over stdin/stdout until the client closes stdin.
pub async fn serve_stdio(
    name: &str,
    args: &[String],
    shelf: SharedShelf,
) -> Result<(), BundledError> {
    match build(name, args, shelf)? {
        Built::Workspace(s) => run_stdio(s).await,
        Built::Notes(s) => run_stdio(s).await,
        Built::Web(s) => run_stdio(s).await,
    }
}

async fn run_stdio<S: ServerHandler>(server: S) -> Result<(), BundledError> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| BundledError::Handshake(Box::new(e)))?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "MCP client went away");
    Ok(())
}

/// Serves bundled server `name` over streamable HTTP at `/mcp` on `listener` until `shutdown`
/// completes. All sessions share one server state (one root, one notes file). Only loopback
/// `Host` headers are accepted (rmcp's guard against DNS rebinding): these servers are local.
pub async fn serve_http(
    name: &str,
    args: &[String],
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    shelf: SharedShelf,
) -> Result<(), BundledError> {
    match build(name, args, shelf)? {
        Built::Workspace(s) => run_http(s, listener, shutdown).await,
        Built::Notes(s) => run_http(s, listener, shutdown).await,
        Built::Web(s) => run_http(s, listener, shutdown).await,
    }
}

async fn run_http<S: ServerHandler + Clone>(
    server: S,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), BundledError> {
    let config = StreamableHttpServerConfig::default();
    // rmcp's own token, cloned rather than created here, so this crate needs no `tokio-util`.
    let sessions = config.cancellation_token.clone();
    let service: StreamableHttpService<S, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "MCP over streamable HTTP at /mcp");
    }
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Open SSE streams would keep a graceful shutdown waiting forever; ending the
            // sessions closes them.
            sessions.cancel();
        })
        .await
        .map_err(BundledError::Http)
}

/// What every bundled server announces: tools, resources and prompts, its name and version,
/// and instructions an agent reads before writing calls.
fn server_info(name: &str, instructions: String) -> rmcp::model::ServerConfig {
    use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
    ServerConfig::new(
        ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .build(),
    )
    .with_server_info(Implementation::new(name, env!("CARGO_PKG_VERSION")))
    .with_instructions(instructions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_builtin_name_has_a_server() {
        // The web server needs no argument (fetch_url alone); the file servers need theirs.
        assert!(build("web", &[], None).is_ok());
        for name in BUILTIN_SERVERS.iter().filter(|n| **n != "web") {
            // No flag given: the error must be about the flag, not an unknown server.
            let err = BundledArgs::parse_in(name, &[], Path::new("/"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("is required"), "{name}: {err}");
        }
    }

    #[test]
    fn paths_resolve_against_the_given_directory() {
        let cwd = Path::new("/teams/a");
        let ws = BundledArgs::parse_in("workspace", &args(&["--root", "../ws"]), cwd).unwrap();
        assert_eq!(ws.kind, BundledKind::Workspace);
        assert_eq!(ws.path, Path::new("/teams/a/../ws"));
        let notes = BundledArgs::parse_in("notes", &args(&["--file=/abs/n.json"]), cwd).unwrap();
        assert_eq!(
            (notes.kind, notes.path),
            (BundledKind::Notes, "/abs/n.json".into())
        );
    }

    #[test]
    fn bad_arguments_are_explained() {
        let cwd = Path::new("/");
        let err = |name: &str, a: &[&str]| {
            BundledArgs::parse_in(name, &args(a), cwd)
                .unwrap_err()
                .to_string()
        };
        assert!(err("nope", &[]).contains("no bundled MCP server `nope`"));
        assert!(err("workspace", &[]).contains("`--root` is required"));
        assert!(err("workspace", &["--root"]).contains("needs a value"));
        assert!(err("workspace", &["--root", ""]).contains("is empty"));
        assert!(err("workspace", &["--root", "a", "--root", "b"]).contains("twice"));
        assert!(err("workspace", &["--file", "a"]).contains("unexpected argument `--file`"));
        assert!(err("notes", &["--root", "a"]).contains("usage: notes --file PATH"));
    }
}
