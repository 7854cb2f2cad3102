//! The `notes` MCP server: a team's shared key-value notes (tools `set_note`, `get_note`,
//! `list_notes`, `delete_note`), each note also a resource `notes:///KEY`, and a `recall_notes`
//! prompt that hands an agent the notes under a prefix.

use crate::notes_store::{Note, NotesError, NotesStore};
use crate::uri;
use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    ListResourcesResult, PaginatedRequestParams, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, Role, ServerConfig,
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

/// The URI scheme of notes.
pub const SCHEME: &str = "notes";
/// A listing shows this much of each note's first line.
const PREVIEW_CHARS: usize = 80;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetArgs {
    /// The note's key, e.g. `design/api`; `/` groups related notes.
    pub key: String,
    /// The note's full text (replaces any earlier text).
    pub text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyArgs {
    /// The note's key.
    pub key: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrefixArgs {
    /// Only notes whose key starts with this; all notes if omitted.
    #[serde(default)]
    pub prefix: Option<String>,
}

/// The notes server. Cheap to clone: every clone (one per HTTP session) shares one store.
#[derive(Clone, Debug)]
pub struct NotesServer {
    store: Arc<NotesStore>,
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

impl NotesServer {
    /// Opens the notes kept in `file` (created on the first change).
    pub fn open(file: &Path) -> Result<Self, NotesError> {
        Ok(Self {
            store: Arc::new(NotesStore::open(file)?),
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        })
    }

    pub fn store(&self) -> &NotesStore {
        &self.store
    }
}

#[tool_router]
impl NotesServer {
    #[tool(
        description = "Save a note under a key, replacing any note with that key. Keys are short names like `design/api`; use `/` to group notes.",
        annotations(
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn set_note(&self, Parameters(a): Parameters<SetArgs>) -> Result<String, String> {
        match self.store.set(&a.key, &a.text).await {
            Ok(true) => Ok(format!("saved new note `{}`", a.key)),
            Ok(false) => Ok(format!("replaced note `{}`", a.key)),
            Err(e) => Err(e.to_string()),
        }
    }

    #[tool(
        description = "Read the note saved under a key.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_note(&self, Parameters(a): Parameters<KeyArgs>) -> Result<String, String> {
        self.store
            .get(&a.key)
            .await
            .map(|n| n.text)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "List notes (all, or those whose key starts with `prefix`): one line each with the key, when it was last set and the start of its text.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_notes(&self, Parameters(a): Parameters<PrefixArgs>) -> String {
        let prefix = a.prefix.unwrap_or_default();
        let notes = self.store.list(&prefix).await;
        if notes.is_empty() {
            return if prefix.is_empty() {
                "no notes yet".into()
            } else {
                format!("no note key starts with `{prefix}`")
            };
        }
        notes
            .iter()
            .map(|(k, n)| format!("{k} ({}): {}", n.updated, preview(n)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[tool(
        description = "Delete the note saved under a key.",
        annotations(destructive_hint = true, open_world_hint = false)
    )]
    async fn delete_note(&self, Parameters(a): Parameters<KeyArgs>) -> Result<String, String> {
        self.store
            .delete(&a.key)
            .await
            .map(|_| format!("deleted note `{}`", a.key))
            .map_err(|e| e.to_string())
    }
}

#[prompt_router]
impl NotesServer {
    #[prompt(
        description = "Recall the team's notes (all, or those under a key prefix) as context for the task at hand."
    )]
    async fn recall_notes(&self, Parameters(a): Parameters<PrefixArgs>) -> Vec<PromptMessage> {
        let prefix = a.prefix.unwrap_or_default();
        let notes = self.store.list(&prefix).await;
        let body = if notes.is_empty() {
            "(there are no such notes yet)".to_owned()
        } else {
            notes
                .iter()
                .map(|(k, n)| format!("## {k}\n{}", n.text))
                .collect::<Vec<_>>()
                .join("\n\n")
        };
        let scope = if prefix.is_empty() {
            "all of the team's notes".to_owned()
        } else {
            format!("the team's notes whose key starts with `{prefix}`")
        };
        vec![PromptMessage::new_text(
            Role::User,
            format!("Here are {scope}. Use them as context and keep them up to date.\n\n{body}"),
        )]
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for NotesServer {
    fn get_info(&self) -> ServerConfig {
        super::server_info(
            "cohort-notes",
            format!(
                "The team's shared notes, kept in {}. Each note is a text under a short key \
             (e.g. `design/api`); `/` groups notes so `list_notes` can filter by prefix. Notes \
             are also resources with URIs `{SCHEME}:///KEY`.",
                self.store.file().display()
            ),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = self
            .store
            .list("")
            .await
            .into_iter()
            .map(|(key, note)| {
                Resource::new(uri::encode(SCHEME, &key), key.clone())
                    .with_description(preview(&note))
                    .with_mime_type("text/plain")
                    .with_size(note.text.len() as u64)
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let key = uri::decode(&uri, SCHEME, "design/api")
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let note = self.store.get(&key).await.map_err(|e| match e {
            NotesError::Missing(_) => ErrorData::resource_not_found(e.to_string(), None),
            _ => ErrorData::invalid_params(e.to_string(), None),
        })?;
        Ok(ReadResourceResult::new(vec![ResourceContents::text(note.text, uri)]).into())
    }
}

/// The start of a note's first line.
fn preview(note: &Note) -> String {
    let first = note.text.lines().next().unwrap_or("");
    let mut short: String = first.chars().take(PREVIEW_CHARS).collect();
    if short.len() < first.len() || note.text.lines().nth(1).is_some() {
        short.push('…');
    }
    short
}
