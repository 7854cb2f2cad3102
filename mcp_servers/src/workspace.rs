//! The `workspace` MCP server: tools, resources (`workspace:///PATH`) and a `review_file`
//! prompt over the files inside one root folder. Every path goes through the sandbox; a refusal
//! is a tool error (or, for resources and prompts, an `invalid_params` error) that says why.

use crate::workspace_fs::{Bounded, Entry, EntryKind, FsError, Workspace};
use crate::{attachments, uri};
use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, Role, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, prompt, prompt_handler, prompt_router, tool,
    tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

/// The URI scheme of workspace files.
pub const SCHEME: &str = "workspace";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathArgs {
    /// File path relative to the workspace root, e.g. `docs/plan.md`.
    pub path: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// File path relative to the workspace root; missing parent folders are created.
    pub path: String,
    /// The text to write.
    pub content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Folder relative to the workspace root; the root if omitted.
    #[serde(default)]
    pub path: Option<String>,
    /// Also list everything below, level by level. Default false.
    #[serde(default)]
    pub recursive: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// A regular expression (Rust regex syntax, case-sensitive; `(?i)` for case-insensitive).
    pub pattern: String,
    /// File or folder to search, relative to the workspace root; the whole root if omitted.
    #[serde(default)]
    pub path: Option<String>,
}

/// The workspace server. Cheap to clone: every clone (one per HTTP session) shares one root.
#[derive(Clone, Debug)]
pub struct WorkspaceServer {
    ws: Arc<Workspace>,
    /// Where attached files are read from; without one, `read_attachment` is not offered.
    shelf: crate::SharedShelf,
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

impl WorkspaceServer {
    /// Serves the folder `root`, creating it if missing.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Self {
            ws: Arc::new(Workspace::open(root)?),
            shelf: None,
            tool_router: Self::without_attachments(),
            prompt_router: Self::prompt_router(),
        })
    }

    /// This server reading attached files from `shelf`; with none, it does not offer
    /// `read_attachment`.
    pub fn with_attachments(mut self, shelf: crate::SharedShelf) -> Self {
        self.tool_router = match shelf {
            Some(_) => Self::tool_router(),
            None => Self::without_attachments(),
        };
        self.shelf = shelf;
        self
    }

    /// Every tool but `read_attachment`, which needs the team's store.
    fn without_attachments() -> ToolRouter<Self> {
        let mut router = Self::tool_router();
        router.remove_route(cohort_core::attachment::READ_TOOL);
        router
    }

    /// The canonical root folder.
    pub fn root(&self) -> &Path {
        self.ws.root()
    }

    /// Runs a file operation off the async workers (a search may read many files).
    async fn run<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Workspace) -> Result<T, FsError> + Send + 'static,
    ) -> Result<T, FsError> {
        let ws = self.ws.clone();
        tokio::task::spawn_blocking(move || op(&ws))
            .await
            .unwrap_or_else(|e| {
                Err(FsError::Io {
                    path: String::new(),
                    source: std::io::Error::other(e),
                })
            })
    }
}

#[tool_router]
impl WorkspaceServer {
    #[tool(
        description = "Read a UTF-8 text file inside the workspace (at most 1 MiB). `path` is relative to the workspace root.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn read_file(&self, Parameters(a): Parameters<PathArgs>) -> Result<String, String> {
        self.run(move |ws| ws.read(&a.path))
            .await
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "Create or replace a text file inside the workspace; missing parent folders are created. `path` is relative to the workspace root.",
        annotations(destructive_hint = true, open_world_hint = false)
    )]
    async fn write_file(&self, Parameters(a): Parameters<WriteArgs>) -> Result<String, String> {
        let len = a.content.len();
        self.run(move |ws| ws.write(&a.path, a.content.as_bytes()))
            .await
            .map(|p| format!("wrote {len} bytes to {p}"))
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "Append text to a file inside the workspace, creating it (and parent folders) if missing. Add your own newlines.",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn append_file(&self, Parameters(a): Parameters<WriteArgs>) -> Result<String, String> {
        let len = a.content.len();
        self.run(move |ws| ws.append(&a.path, &a.content))
            .await
            .map(|p| format!("appended {len} bytes to {p}"))
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "List a folder of the workspace (the root if `path` is omitted): one path per line relative to the root; folders end with `/`, symlinks with `@`, files show their size; FIFOs, sockets and devices are marked and cannot be read or written. `recursive: true` lists everything below (skipping .git).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_dir(&self, Parameters(a): Parameters<ListArgs>) -> Result<String, String> {
        let path = a.path.unwrap_or_default();
        let recursive = a.recursive.unwrap_or(false);
        let shown = if path.is_empty() {
            ".".into()
        } else {
            path.clone()
        };
        self.run(move |ws| ws.list(&path, recursive))
            .await
            .map(|listing| render_listing(&shown, listing))
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "Find lines matching a regular expression (Rust regex syntax; `(?i)` makes it case-insensitive) in a file or folder of the workspace (the whole root if `path` is omitted). Returns `path:line:text`, at most 200 matches; files over 1 MiB or not UTF-8 are skipped.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search(&self, Parameters(a): Parameters<SearchArgs>) -> Result<String, String> {
        let path = a.path.unwrap_or_default();
        let pattern = a.pattern;
        let shown = pattern.clone();
        let found = self
            .run(move |ws| ws.search(&pattern, &path))
            .await
            .map_err(|e| e.to_string())?;
        if found.items.is_empty() {
            return Ok(format!("no line contains `{shown}`"));
        }
        let mut out: Vec<String> = found
            .items
            .iter()
            .map(|m| format!("{}:{}:{}", m.path, m.line, m.text))
            .collect();
        if found.truncated {
            out.push("… (more matches; narrow the path or the pattern)".into());
        }
        Ok(out.join("\n"))
    }

    #[tool(
        description = "Read a file a person attached to a goal or a message, by the id the message or the task lists (`att-…`): text comes back as text, an image as an image. `save_as` (a path relative to the workspace root) also saves it in the workspace, where the other tools reach it.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    async fn read_attachment(
        &self,
        Parameters(a): Parameters<attachments::ReadArgs>,
    ) -> Result<rmcp::model::CallToolResult, String> {
        let shelf = self
            .shelf
            .clone()
            .ok_or("this workspace server was started without the team's store")?;
        let file = attachments::fetch(&*shelf, &a.id).await?;
        let Some(path) = a.save_as else {
            return Ok(attachments::result(&file, None));
        };
        let bytes = file.bytes.clone();
        let saved = self
            .run(move |ws| ws.write(&path, &bytes))
            .await
            .map_err(|e| e.to_string())?;
        Ok(attachments::result(&file, Some(&saved)))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewArgs {
    /// File path relative to the workspace root.
    pub path: String,
}

#[prompt_router]
impl WorkspaceServer {
    #[prompt(
        description = "Ask for a review of one workspace file; the message carries the file's current content."
    )]
    async fn review_file(
        &self,
        Parameters(a): Parameters<ReviewArgs>,
    ) -> Result<Vec<PromptMessage>, ErrorData> {
        let path = a.path.clone();
        let text = self
            .run(move |ws| ws.read(&a.path))
            .await
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        Ok(vec![PromptMessage::new_text(
            Role::User,
            format!(
                "Please review the workspace file `{path}`: point out mistakes, unclear parts and \
                 missing pieces, most important first, and suggest concrete fixes.\n\n\
                 ----- {path} -----\n{text}\n----- end of {path} -----"
            ),
        )])
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for WorkspaceServer {
    fn get_info(&self) -> ServerConfig {
        super::server_info(
            "cohort-workspace",
            format!(
                "Files inside one workspace folder ({}). Every path is relative to that folder, with \
             `/` between names (e.g. `docs/plan.md`); absolute paths, `..` above the folder and \
             symlinks leading out of it are refused. Files are also resources with URIs \
             `{SCHEME}:///PATH`.",
                self.root().display()
            ),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let files = self
            .run(|ws| ws.files())
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let resources = files
            .items
            .into_iter()
            .filter_map(|e| match e.kind {
                EntryKind::File { size } => Some(
                    Resource::new(uri::encode(SCHEME, &e.path), e.path.clone())
                        .with_mime_type(mime_type(&e.path))
                        .with_size(size),
                ),
                _ => None,
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{SCHEME}:///{{path}}"), "workspace file")
                .with_description("Any text file in the workspace, by its path from the root."),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let path = uri::decode(&uri, SCHEME, "docs/plan.md")
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let text = self
            .run(move |ws| ws.read(&path))
            .await
            .map_err(|e| match e {
                FsError::NotFound(_) => ErrorData::resource_not_found(e.to_string(), None),
                _ => ErrorData::invalid_params(e.to_string(), None),
            })?;
        let mime = mime_type(&uri);
        Ok(
            ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
                uri,
                mime_type: Some(mime.into()),
                text,
                meta: None,
            }])
            .into(),
        )
    }
}

fn render_listing(shown: &str, listing: Bounded<Entry>) -> String {
    if listing.items.is_empty() {
        return format!("{shown} is empty");
    }
    let mut out: Vec<String> = listing
        .items
        .iter()
        .map(|e| match e.kind {
            EntryKind::Dir => format!("{}/", e.path),
            EntryKind::Symlink => format!("{}@", e.path),
            EntryKind::File { size } => format!("{} ({size} bytes)", e.path),
            EntryKind::Special { what } => format!("{} ({what}; not readable)", e.path),
        })
        .collect();
    if listing.truncated {
        out.push("… (more entries; list a subfolder)".into());
    }
    out.join("\n")
}

/// A MIME type from the extension: enough for clients to pick a renderer.
fn mime_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("md") => "text/markdown",
        Some("json") => "application/json",
        Some("yaml" | "yml") => "application/yaml",
        Some("html") => "text/html",
        Some("csv") => "text/csv",
        _ => "text/plain",
    }
}
