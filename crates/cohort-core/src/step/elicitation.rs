//! A server's question during a tool call (MCP elicitation; seed 001's interactive answers
//! from inside a tool): the call stays open while its step waits (`waiting_for_param`) for a
//! person to fill the form the server sent, or to decline it. Their answer goes back to the
//! server through the call and the step runs on; a wait that runs out answers `cancel`, as
//! MCP has a client answer a question nobody took up.

use super::approval::{Verdict, VerdictError};
use super::params::field;
use crate::event::StepUpdate;
use crate::ids::{AgentId, StepId};
use crate::state::{Agent, Ask, StepExecutionState, StepResult, StepState};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The key of a server's question in its step's `execute_result` while it waits.
pub const KEY: &str = crate::state::ELICITATION_KEY;
/// The most of a server's message a step keeps (and a person is shown).
const MESSAGE_CHARS: usize = 4_000;

/// What goes back to the server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", content = "content", rename_all = "snake_case")]
pub enum ElicitationAnswer {
    /// The form, filled (a field left out takes the form's default).
    Accept(Map<String, Value>),
    /// The person will not answer; the server's work may go on without it.
    Decline,
    /// Nobody answered (the wait ran out, the step or the team stopped).
    Cancel,
}

/// A server's question, as its step keeps it while a person is asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElicitationRequest {
    /// The MCP server that asks.
    pub server: String,
    /// The tool whose call it asks during.
    pub tool: String,
    /// What the server says to the person.
    pub message: String,
    /// The form to fill; none when the server asks for a yes or a no only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Ask>,
}

impl ElicitationRequest {
    /// The question waiting on `step`, if one does.
    pub fn of(step: &StepState) -> Option<ElicitationRequest> {
        let v = step.execute_result.as_ref()?.get(KEY)?;
        serde_json::from_value(v.clone()).ok()
    }
}

/// The question `server` asks with `message` and the form `schema` (its JSON Schema: an
/// object of string, number, integer, boolean and enum fields), during a call of `tool`; or
/// why it cannot be put to a person as a form.
pub fn elicitation_request(
    server: &str,
    tool: &str,
    message: &str,
    schema: &Value,
) -> Result<ElicitationRequest, String> {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut fields = Vec::new();
    for (key, prop) in properties {
        let required = required.contains(&key.as_str());
        if prop.get("type").and_then(Value::as_str) == Some("array") {
            // A pick of several values: no field of a form shows one, so it keeps its default
            // (filled in as the answer goes back).
            if required && prop.get("default").is_none() {
                return Err(format!(
                    "it asks for several values at once (`{key}`), which a form cannot show"
                ));
            }
            continue;
        }
        fields.push(field(key, prop, required));
    }
    // What must be filled comes first (a form's fields reach the client sorted by key).
    fields.sort_by_key(|f| !f.required);
    let form = if fields.is_empty() {
        None
    } else {
        let form = Ask::Form { fields };
        form.check()
            .map_err(|e| format!("its form cannot be shown to a person: {e}"))?;
        Some(form)
    };
    Ok(ElicitationRequest {
        server: server.to_owned(),
        tool: tool.to_owned(),
        message: message.chars().take(MESSAGE_CHARS).collect(),
        form,
    })
}

/// Puts the running step `id` on hold for the server's question `req` (the call stays open).
pub fn await_elicitation(agent: &mut Agent, id: &StepId, req: &ElicitationRequest) {
    agent.update_step(
        id,
        StepUpdate {
            execution_state: Some(StepExecutionState::WaitingForParam),
            execute_result: Some(Box::new(StepResult::output(json!({ KEY: req })))),
            ..Default::default()
        },
    );
}

/// The question is answered (or over): the step runs on, its call still open.
pub fn resume_call(agent: &mut Agent, id: &StepId) {
    agent.update_step(
        id,
        StepUpdate {
            execution_state: Some(StepExecutionState::Running),
            execute_result: Some(Box::new(StepResult::default())),
            ..Default::default()
        },
    );
}

/// The message that tells a person what the server asks.
pub fn elicitation_notice(
    step: &StepState,
    req: &ElicitationRequest,
    t: &crate::texts::Texts,
) -> String {
    let form = req
        .form
        .as_ref()
        .map_or_else(|| t.elicitation_yes_no(), |f| f.describe(t));
    t.elicitation_notice(
        &req.server,
        &step.agent_id,
        &req.tool,
        &step.step_id,
        &step.step_intention,
        &req.message,
        form,
    )
}

/// `by`'s verdict on the question waiting on `step`: its answer (the values checked against
/// the form), and the step running on.
pub fn answer_elicitation(
    agent: &mut Agent,
    step: &StepState,
    by: &AgentId,
    verdict: Verdict,
) -> Result<ElicitationAnswer, VerdictError> {
    let id = &step.step_id;
    let req = ElicitationRequest::of(step).ok_or_else(|| VerdictError::NotWaiting(id.clone()))?;
    let answer = match (verdict, &req.form) {
        (Verdict::FillParams { values }, Some(form)) => {
            let filled = form
                .answer(&values.to_string())
                .map_err(VerdictError::BadParams)?;
            ElicitationAnswer::Accept(serde_json::from_str(&filled).unwrap_or_default())
        }
        (Verdict::FillParams { values }, None) if values.as_object().is_some_and(Map::is_empty) => {
            ElicitationAnswer::Accept(Map::new())
        }
        (Verdict::FillParams { .. }, None) => {
            return Err(VerdictError::BadParams(crate::state::AskError::NotAForm(
                "the server asks for a yes or a no: accept with {} or decline".into(),
            )));
        }
        (Verdict::Reject { .. }, _) => ElicitationAnswer::Decline,
        _ => {
            return Err(VerdictError::WrongKind(
                id.clone(),
                "a server's question".into(),
                "answer it with POST /api/step/{id}/params {values}, or decline it with /reject"
                    .into(),
            ));
        }
    };
    tracing::info!(agent = %agent.agent_id, step = %id, %by, "a person answered a server's question");
    resume_call(agent, id);
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageRef;
    use crate::state::AgentState;
    use crate::state::{Executor, FieldKind};

    fn running_tool_step(agent: &mut Agent) -> StepId {
        let step = StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "w".into(),
            Executor::Tool("everything".into()),
            "call it",
            "",
        );
        let id = step.step_id.clone();
        agent.add_steps(vec![step]);
        agent.start_next().unwrap();
        id
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "color": {"type": "string", "enum": ["red", "blue"], "description": "Colour"},
                "count": {"type": "integer", "default": 3},
                "ok": {"type": "boolean"}
            },
            "required": ["color"]
        })
    }

    #[test]
    fn a_servers_form_becomes_a_persons_form_with_its_kinds_defaults_and_required_fields() {
        let req = elicitation_request("everything", "ask", "Pick one", &schema()).unwrap();
        let Some(Ask::Form { fields }) = &req.form else {
            panic!("{req:?}")
        };
        let by_key = |k: &str| fields.iter().find(|f| f.key == k).unwrap();
        assert_eq!(by_key("color").kind, FieldKind::Select);
        assert!(by_key("color").required);
        assert_eq!(by_key("count").kind, FieldKind::Number);
        assert_eq!(by_key("count").default, Some(json!(3)));
        assert!(!by_key("ok").required);
        assert_eq!(fields[0].key, "color", "the required field first");
        let yes_no = elicitation_request("s", "t", "Go on?", &json!({"type": "object"})).unwrap();
        assert_eq!(yes_no.form, None);
        let too_many: Map<String, Value> = (0..crate::state::MAX_FIELDS + 1)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect();
        let wide = json!({"type": "object", "properties": too_many});
        assert!(elicitation_request("s", "t", "m", &wide).is_err());
    }

    #[test]
    fn a_waiting_question_is_answered_checked_or_declined_and_its_step_runs_on() {
        let mut agent = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "r".into(),
            "p".into(),
        ));
        let id = running_tool_step(&mut agent);
        let req = elicitation_request("everything", "ask", "Pick one", &schema()).unwrap();
        await_elicitation(&mut agent, &id, &req);
        let step = agent.agent_step.get(&id).unwrap().clone();
        assert_eq!(step.execution_state, StepExecutionState::WaitingForParam);
        assert_eq!(ElicitationRequest::of(&step), Some(req));
        assert!(
            elicitation_notice(
                &step,
                &ElicitationRequest::of(&step).unwrap(),
                &crate::texts::Texts::english()
            )
            .contains("Pick one")
        );
        let by = AgentId::from("op");
        let bad = Verdict::FillParams {
            values: json!({"color": "green"}),
        };
        assert!(matches!(
            answer_elicitation(&mut agent, &step, &by, bad),
            Err(VerdictError::BadParams(_))
        ));
        let good = Verdict::FillParams {
            values: json!({"color": "blue"}),
        };
        let answer = answer_elicitation(&mut agent, &step, &by, good).unwrap();
        let ElicitationAnswer::Accept(content) = answer else {
            panic!("{answer:?}")
        };
        assert_eq!(content["color"], "blue");
        assert_eq!(content["count"], 3, "left empty: its default");
        let now = agent.agent_step.get(&id).unwrap();
        assert_eq!(now.execution_state, StepExecutionState::Running);
        assert_eq!(ElicitationRequest::of(now), None);
        // Declined.
        await_elicitation(
            &mut agent,
            &id,
            &elicitation_request("s", "t", "m", &schema()).unwrap(),
        );
        let step = agent.agent_step.get(&id).unwrap().clone();
        let no = Verdict::Reject {
            reason: "not now".into(),
        };
        assert_eq!(
            answer_elicitation(&mut agent, &step, &by, no),
            Ok(ElicitationAnswer::Decline)
        );
    }
}
