//! Asking a server for its description: its tools, resources, resource templates and prompts
//! are listed through rmcp and kept as `cohort_core`'s typed [`ServerDescription`], with what
//! the runtime uses of each (what rmcp hands over typed stays typed; nothing walks JSON).

use cohort_core::server_description::{
    PromptArgumentDescription, PromptDescription, ResourceDescription, ResourceTemplateDescription,
    ServerDescription, ToolAnnotations, ToolDescription,
};
use rmcp::model::{ErrorCode, Prompt, Resource, ResourceTemplate, ServerCapabilities, Tool};
use rmcp::service::{Peer, RoleClient, ServiceError};
use serde_json::Value;
use std::future::Future;

/// Lists a server's tools, resources, resource templates and prompts; a capability the
/// server does not declare (or a list method it does not know) is an empty list.
pub(crate) async fn list(peer: Peer<RoleClient>) -> Result<ServerDescription, ServiceError> {
    let caps = peer.peer_info().map(|info| info.capabilities.clone());
    let declared = |has: fn(&ServerCapabilities) -> bool| caps.as_ref().is_none_or(has);
    let tools = listed(declared(|c| c.tools.is_some()), peer.list_all_tools()).await?;
    let has_resources = declared(|c| c.resources.is_some());
    let resources = listed(has_resources, peer.list_all_resources()).await?;
    let templates = listed(has_resources, peer.list_all_resource_templates()).await?;
    let prompts = listed(declared(|c| c.prompts.is_some()), peer.list_all_prompts()).await?;
    Ok(ServerDescription {
        // The server's own instructions (e.g. the workspace root and its URI scheme) help an
        // agent write correct calls.
        instructions: peer.peer_info().and_then(|info| info.instructions.clone()),
        prompts: prompts.iter().map(prompt).collect(),
        resource_templates: templates.iter().map(resource_template).collect(),
        resources: resources.iter().map(resource).collect(),
        tools: tools.iter().map(tool).collect(),
    })
}

/// Runs a list request only if the capability is declared; a server that does not know the
/// method has nothing to list either.
async fn listed<T>(
    declared: bool,
    request: impl Future<Output = Result<Vec<T>, ServiceError>>,
) -> Result<Vec<T>, ServiceError> {
    match if declared {
        request.await
    } else {
        Ok(Vec::new())
    } {
        Err(ServiceError::McpError(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => Ok(Vec::new()),
        other => other,
    }
}

/// What the runtime keeps of a tool: its icons and `_meta` are for other clients.
fn tool(t: &Tool) -> ToolDescription {
    ToolDescription {
        annotations: t.annotations.as_ref().map(|a| ToolAnnotations {
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
            read_only_hint: a.read_only_hint,
            title: a.title.clone(),
        }),
        description: t.description.as_deref().map(str::to_owned),
        input_schema: Value::Object((*t.input_schema).clone()),
        name: t.name.to_string(),
        output_schema: t
            .output_schema
            .as_ref()
            .map(|s| Value::Object((**s).clone())),
        title: t.title.clone(),
    }
}

fn resource(r: &Resource) -> ResourceDescription {
    ResourceDescription {
        description: r.description.clone(),
        mime_type: r.mime_type.clone(),
        name: r.name.clone(),
        uri: r.uri.clone(),
    }
}

fn resource_template(r: &ResourceTemplate) -> ResourceTemplateDescription {
    ResourceTemplateDescription {
        description: r.description.clone(),
        mime_type: r.mime_type.clone(),
        name: r.name.clone(),
        uri_template: r.uri_template.clone(),
    }
}

fn prompt(p: &Prompt) -> PromptDescription {
    PromptDescription {
        arguments: (p.arguments.iter().flatten())
            .map(|a| PromptArgumentDescription {
                description: a.description.clone(),
                name: a.name.clone(),
                required: a.required.unwrap_or(false),
            })
            .collect(),
        description: p.description.clone(),
        name: p.name.clone(),
    }
}
