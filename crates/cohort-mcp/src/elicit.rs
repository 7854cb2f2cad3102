//! A server's question during a call (MCP elicitation): who answers it ([`Elicitor`]: for a
//! team's call, the person its step asks; for the conformance client, a person who accepts the
//! form as offered), and the answer as the server gets it: what the person accepted, with the
//! form's defaults filled in for what they left empty (SEP-1034), or their refusal. A client
//! with no one to ask declines.

use cohort_core::step::elicitation::ElicitationAnswer;
use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ElicitationSchema, ErrorData, FormElicitationCapability, JsonObject,
};
use rmcp::service::{RequestContext, RoleClient};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// What a server asks.
#[derive(Clone, Debug)]
pub struct Question {
    /// The server that asks (its name in the team).
    pub server: String,
    /// What it says to the person.
    pub message: String,
    /// The form it wants filled, as its JSON Schema.
    pub schema: Value,
}

/// Who answers the servers' questions.
pub trait Elicitor: Send + Sync {
    fn ask(&self, question: Question) -> BoxFuture<'static, ElicitationAnswer>;
}

/// Who may be asked, as a client is made: nobody (questions are declined), one answerer for
/// every question, or the caller of each call ([`crate::McpClient::call_asking`]).
#[derive(Clone)]
pub enum Elicitation {
    Nobody,
    Always(Arc<dyn Elicitor>),
    PerCall,
}

/// The answerers of the calls under way on one server, each under the number of its call.
#[derive(Default)]
pub(crate) struct Askers {
    next: std::sync::atomic::AtomicU64,
    under_way: Mutex<Vec<(u64, Arc<dyn Elicitor>)>>,
}

/// A call's answerer, registered while the call is under way.
pub(crate) struct Asking<'a> {
    askers: &'a Askers,
    no: u64,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.askers.lock().retain(|(no, _)| *no != self.no);
    }
}

impl Askers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Arc<dyn Elicitor>)>> {
        self.under_way.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `asker` for a call until the returned guard drops.
    pub(crate) fn asking(&self, asker: Arc<dyn Elicitor>) -> Asking<'_> {
        let no = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock().push((no, asker));
        Asking { askers: self, no }
    }

    /// The answerer of the one call under way. MCP ties a server's question to the request it
    /// is asked during, but rmcp does not say which: with several calls under way on the one
    /// session, the question cannot be tied to one and is declined.
    fn only(&self, server: &str) -> Option<Arc<dyn Elicitor>> {
        let under_way = self.lock();
        match under_way.as_slice() {
            [(_, one)] => Some(one.clone()),
            [] => None,
            many => {
                tracing::warn!(
                    server,
                    calls = many.len(),
                    "a server asked a question while several calls to it were under way: it cannot be tied to one, so it is declined"
                );
                None
            }
        }
    }
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
    info: ClientConfig,
    server: String,
    elicitation: Elicitation,
    askers: Arc<Askers>,
}

impl Handler {
    pub(crate) fn new(server: &str, elicitation: Elicitation, askers: Arc<Askers>) -> Handler {
        let mut capabilities = ClientCapabilities::default();
        if !matches!(elicitation, Elicitation::Nobody) {
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
            elicitation,
            askers,
        }
    }

    /// Who answers a question asked now.
    fn answerer(&self) -> Option<Arc<dyn Elicitor>> {
        match &self.elicitation {
            Elicitation::Nobody => None,
            Elicitation::Always(e) => Some(e.clone()),
            Elicitation::PerCall => self.askers.only(&self.server),
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
        ) = (self.answerer(), request)
        else {
            // No one to ask, or a question answered on a web page (URL mode) a team does not
            // open.
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let question = Question {
            server: self.server.clone(),
            message,
            schema: serde_json::to_value(&requested_schema).unwrap_or_default(),
        };
        Ok(match elicitor.ask(question).await {
            ElicitationAnswer::Accept(content) => {
                let content = with_defaults(&requested_schema, content);
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
            }
            ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitationAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
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
