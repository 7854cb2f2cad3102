//! A server's question during a call (MCP elicitation): who answers it ([`Elicitor`]: the
//! team asks a person; the conformance client accepts the form as offered), and the answer as
//! the server gets it: what the person accepted, with the form's defaults filled in for what
//! they left empty (SEP-1034), or their refusal. A client with no one to ask declines.

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ElicitationSchema, ErrorData, FormElicitationCapability, JsonObject,
};
use rmcp::service::{RequestContext, RoleClient};
use serde_json::Value;
use std::sync::Arc;

/// What a server asks.
#[derive(Clone, Debug)]
pub struct Question {
    /// The server that asks (its name in the team).
    pub server: String,
    /// What it says to the person.
    pub message: String,
    /// The form it wants filled.
    pub schema: ElicitationSchema,
}

/// The person's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The form, filled (what is left out takes the form's default).
    Accept(JsonObject),
    /// They will not answer; the server's work may go on without it.
    Decline,
    /// They stop the whole operation.
    Cancel,
}

/// Who answers the servers' questions.
pub trait Elicitor: Send + Sync {
    fn ask(&self, question: Question) -> BoxFuture<'static, Answer>;
}

/// `content` with each field of `schema` that it leaves out set to the field's default, when
/// the field has one.
pub fn with_defaults(schema: &ElicitationSchema, mut content: JsonObject) -> JsonObject {
    for (name, field) in &schema.properties {
        if content.contains_key(name) {
            continue;
        }
        // Every kind of field (string, number, integer, boolean, enum) keeps its default under
        // the same key of its JSON Schema.
        let default = serde_json::to_value(field)
            .ok()
            .and_then(|mut f| f.get_mut("default").map(Value::take));
        if let Some(default) = default.filter(|d| !d.is_null()) {
            content.insert(name.clone(), default);
        }
    }
    content
}

/// The client side of a session with one server: how it introduces itself, and who answers
/// the server's questions.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) info: ClientConfig,
    pub(crate) server: String,
    pub(crate) elicitor: Option<Arc<dyn Elicitor>>,
}

impl Handler {
    pub(crate) fn new(server: &str, elicitor: Option<Arc<dyn Elicitor>>) -> Handler {
        let mut capabilities = ClientCapabilities::default();
        if elicitor.is_some() {
            let mut can = ElicitationCapability::default();
            can.form = Some(FormElicitationCapability::default());
            capabilities.elicitation = Some(can);
        }
        // The client opens a session with `initialize`, so it offers the newest version that
        // has that handshake (rmcp's default names a later one that has none, which servers
        // of the released versions answer with their own, and MCP's conformance suite fails).
        let info = ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("cohort", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE);
        Handler {
            info,
            server: server.to_owned(),
            elicitor,
        }
    }
}

impl rmcp::ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let (
            Some(elicitor),
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            },
        ) = (&self.elicitor, request)
        else {
            // No one to ask, or a question answered on a web page (URL mode) a team does not
            // open.
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let question = Question {
            server: self.server.clone(),
            message,
            schema: requested_schema.clone(),
        };
        Ok(match elicitor.ask(question).await {
            Answer::Accept(content) => {
                let content = with_defaults(&requested_schema, content);
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
            }
            Answer::Decline => ElicitResult::new(ElicitationAction::Decline),
            Answer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_a_person_leaves_out_takes_the_forms_default_and_what_they_give_stands() {
        let schema: ElicitationSchema = serde_json::from_value(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
                "note": {"type": "string"}
            }
        }))
        .unwrap();
        let given = json!({"age": 41}).as_object().unwrap().clone();
        let filled = with_defaults(&schema, given);
        assert_eq!(
            Value::Object(filled),
            json!({"name": "John Doe", "age": 41, "score": 95.5, "status": "active", "verified": true})
        );
    }
}
