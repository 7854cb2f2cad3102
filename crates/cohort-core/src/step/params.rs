//! Missing parameters (seed 000's is_param_error, get_missing_param, STEP_WAITING_FOR_PARAM,
//! fill_params): with `tool_approval.ask_for_params`, a tool call refused for bad or missing
//! arguments does not fail; the step waits (`waiting_for_param`) while a person is asked for
//! exactly those fields, in a form made from the tool's JSON schema. Their values, checked
//! against the form, go into the arguments and the call is made again (through the same risk
//! check as any call).

use super::approval::VerdictError;
use crate::call::McpCall;
use crate::event::StepUpdate;
use crate::ids::{AgentId, StepId};
use crate::state::{Agent, StepExecutionState, StepResult, StepState};
use crate::state::{Ask, AskField, FieldKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The key of a parameter request in its step's `execute_result`.
pub const KEY: &str = crate::state::PARAMS_KEY;

/// What a person is asked to fill in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamRequest {
    /// The MCP server the tool is called on.
    pub server: String,
    /// The tool whose call was refused.
    pub tool: String,
    /// The arguments as the agent wrote them.
    pub arguments: Value,
    /// Why the call was refused.
    pub reason: String,
    /// The fields to fill, as a form (`step::ask`).
    pub form: Ask,
    /// Fields whose schema type is an array or object: their text is read as JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_fields: Vec<String>,
}

impl ParamRequest {
    /// The request waiting on `step`, if one does.
    pub fn of(step: &StepState) -> Option<ParamRequest> {
        let v = step.execute_result.as_ref()?.get(KEY)?;
        serde_json::from_value(v.clone()).ok()
    }
}

/// The request for a call of `tool` refused for `reason`: a form of the schema's required
/// fields left out and the fields at fault (`named`, as the refusal was judged). `None` when
/// no field can be named (then the call just fails, and the agent decides).
pub fn param_request(
    server: &str,
    tool: &str,
    arguments: &Map<String, Value>,
    schema: &Value,
    reason: &str,
    named: &[String],
) -> Option<ParamRequest> {
    let properties = schema.get("properties")?.as_object()?;
    let empty = |k: &str| match arguments.get(k) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.trim().is_empty(),
        _ => false,
    };
    let mut keys: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|k| properties.contains_key(*k) && empty(k))
        .map(str::to_owned)
        .collect();
    for k in named {
        if properties.contains_key(k) && !keys.contains(k) {
            keys.push(k.clone());
        }
    }
    let fields: Vec<AskField> = keys
        .iter()
        .take(crate::state::MAX_CHOICES)
        .map(|k| field(k, &properties[k], true))
        .collect();
    let json_fields = keys
        .iter()
        .filter(|k| {
            matches!(
                properties[k.as_str()].get("type").and_then(Value::as_str),
                Some("array" | "object")
            )
        })
        .cloned()
        .collect();
    let form = Ask::Form { fields };
    form.check().ok()?;
    Some(ParamRequest {
        server: server.to_owned(),
        tool: tool.to_owned(),
        arguments: Value::Object(arguments.clone()),
        reason: reason.to_owned(),
        form,
        json_fields,
    })
}

/// A form field for the JSON Schema property `key` (a field of a tool's input, or of a form
/// a server sends), with its default when the schema gives one.
pub(crate) fn field(key: &str, prop: &Value, required: bool) -> AskField {
    // A choice is an `enum` of values, or a `oneOf` of titled constants (its values are the
    // constants).
    let listed = |k: &str| prop.get(k).and_then(Value::as_array);
    let options: Vec<String> = match (listed("enum"), listed("oneOf")) {
        (Some(e), _) => e
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        (None, Some(one_of)) => one_of
            .iter()
            .filter_map(|o| o.get("const")?.as_str())
            .map(str::to_owned)
            .collect(),
        (None, None) => Vec::new(),
    };
    let kind = match prop.get("type").and_then(Value::as_str) {
        _ if options.len() >= 2 => FieldKind::Select,
        Some("number" | "integer") => FieldKind::Number,
        Some("boolean") => FieldKind::Boolean,
        _ => FieldKind::Text,
    };
    let label: String = prop
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or(key)
        .chars()
        .take(200)
        .collect();
    AskField {
        key: key.to_owned(),
        label,
        kind,
        required,
        options: if kind == FieldKind::Select {
            options
        } else {
            Vec::new()
        },
        min: prop.get("minimum").and_then(Value::as_f64),
        max: prop.get("maximum").and_then(Value::as_f64),
        default: prop.get("default").filter(|d| !d.is_null()).cloned(),
        description: String::new(),
        max_length: prop
            .get("maxLength")
            .and_then(Value::as_u64)
            .map(|n| n as usize),
    }
}

/// Puts the step `id` on hold for `req` (state `waiting_for_param`).
pub fn await_params(
    agent: &mut Agent,
    id: &StepId,
    req: &ParamRequest,
    so_far: &super::ToolAttempts,
) {
    // What the call took so far is kept on the step: a restart while the person has not
    // answered still counts the retries and repairs made (each is bounded per call).
    let waiting = StepResult {
        repairs: so_far.repairs.clone(),
        tool_retries: so_far.retries.clone(),
        ..StepResult::output(json!({ KEY: req }))
    };
    agent.update_step(
        id,
        StepUpdate {
            execution_state: Some(StepExecutionState::WaitingForParam),
            execute_result: Some(Box::new(waiting)),
            ..Default::default()
        },
    );
}

/// The message that tells a person which fields to fill.
pub fn params_notice(step: &StepState, req: &ParamRequest, t: &crate::texts::Texts) -> String {
    t.params_notice(
        &step.agent_id,
        &req.tool,
        &req.server,
        &step.step_id,
        &step.step_intention,
        &req.reason,
        req.form.describe(t),
    )
}

/// `by` fills the fields of the request waiting on `step` with `values` (a JSON object):
/// checked against the form, merged into the arguments, and the call to make again.
pub fn fill_params(
    agent: &mut Agent,
    step: &StepState,
    by: &AgentId,
    values: &Value,
) -> Result<McpCall, VerdictError> {
    let req =
        ParamRequest::of(step).ok_or_else(|| VerdictError::NotWaiting(step.step_id.clone()))?;
    let filled = req
        .form
        .answer(&values.to_string())
        .map_err(VerdictError::BadParams)?;
    let filled: Map<String, Value> = serde_json::from_str(&filled).unwrap_or_default();
    let mut arguments = req.arguments.as_object().cloned().unwrap_or_default();
    for (k, v) in &filled {
        let v = if req.json_fields.contains(k) {
            json_text(v)
        } else {
            v.clone()
        };
        arguments.insert(k.clone(), v);
    }
    let keys: Vec<&String> = filled.keys().collect();
    let waited = step.execute_result.as_ref();
    let running = StepResult {
        repairs: waited.map(|r| r.repairs.clone()).unwrap_or_default(),
        tool_retries: waited.map(|r| r.tool_retries.clone()).unwrap_or_default(),
        ..StepResult::output(json!({ "params_filled": { "by": by, "fields": keys } }))
    };
    agent.update_step(
        &step.step_id,
        StepUpdate {
            execution_state: Some(StepExecutionState::Running),
            instruction_content: Some(json!({ "tool_name": req.tool, "arguments": arguments })),
            execute_result: Some(Box::new(running)),
            ..Default::default()
        },
    );
    Ok(McpCall::Tool {
        name: req.tool,
        arguments,
    })
}

/// The text a person typed for an array or object argument, as that JSON (as typed if it is
/// not JSON: the schema check then says what is wrong).
fn json_text(v: &Value) -> Value {
    match v {
        Value::String(s) if s.starts_with(['[', '{']) => {
            serde_json::from_str(s).unwrap_or_else(|_| v.clone())
        }
        _ => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageRef;
    use crate::state::AgentState;
    use crate::state::Executor;

    fn schema() -> Value {
        json!({"type": "object", "required": ["path", "content"], "properties": {
            "path": {"type": "string", "description": "Where to write"},
            "content": {"type": "string"},
            "mode": {"type": "string", "enum": ["create", "overwrite"]},
            "tags": {"type": "array"},
        }})
    }

    #[test]
    fn the_form_asks_for_the_required_fields_left_out_and_the_ones_named() {
        let mut args = Map::new();
        args.insert("path".into(), json!("a.txt"));
        let req = param_request(
            "ws",
            "write_file",
            &args,
            &schema(),
            "missing required argument `content`; argument `mode` must be one of",
            &["content".into(), "mode".into(), "nonsense".into()],
        )
        .unwrap();
        let Ask::Form { fields } = &req.form else {
            panic!()
        };
        let keys: Vec<&str> = fields.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["content", "mode"]);
        assert_eq!(fields[1].kind, FieldKind::Select);
        assert_eq!(fields[1].options, ["create", "overwrite"]);
        // Nothing to ask for: no request.
        let full: Map<String, Value> =
            serde_json::from_value(json!({"path": "a", "content": "b"})).unwrap();
        assert!(
            param_request(
                "ws",
                "write_file",
                &full,
                &schema(),
                "the server said no",
                &[]
            )
            .is_none()
        );
    }

    #[test]
    fn filled_values_are_checked_merged_and_the_call_made_again() {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "r".into(),
            "p".into(),
        ));
        let s = StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "w".into(),
            Executor::Tool("ws".into()),
            "write",
            "",
        );
        let id = s.step_id.clone();
        a.add_steps(vec![s]);
        a.start_next();
        let args: Map<String, Value> = serde_json::from_value(json!({"path": "a.txt"})).unwrap();
        let req = param_request(
            "ws",
            "write_file",
            &args,
            &schema(),
            "missing required argument `content` and `tags`",
            &["tags".into()],
        )
        .unwrap();
        let so_far = super::super::ToolAttempts {
            retries: Vec::new(),
            repairs: vec![crate::policy::Fired::new(
                crate::policy::Repair::RefusalJudged,
                "judged",
            )],
        };
        await_params(&mut a, &id, &req, &so_far);
        let step = a.agent_step.get(&id).unwrap().clone();
        assert_eq!(step.execution_state, StepExecutionState::WaitingForParam);
        assert_eq!(
            step.execute_result.as_ref().unwrap().repairs,
            so_far.repairs
        );
        assert!(
            params_notice(&step, &req, &crate::texts::Texts::english())
                .contains("`content` (text, required)")
        );
        let e = fill_params(&mut a, &step, &"op".into(), &json!({"content": " "})).unwrap_err();
        assert!(e.to_string().contains("`content`: it is required"), "{e}");
        let call = fill_params(
            &mut a,
            &step,
            &"op".into(),
            &json!({"content": "[1]", "tags": "[\"x\"]"}),
        )
        .unwrap();
        let McpCall::Tool { arguments, .. } = call else {
            panic!()
        };
        // A string argument keeps text that looks like JSON; an array argument reads it.
        assert_eq!(
            Value::Object(arguments),
            json!({"path": "a.txt", "content": "[1]", "tags": ["x"]})
        );
        let step = a.agent_step.get(&id).unwrap();
        assert_eq!(step.execution_state, StepExecutionState::Running);
        // What the call took before the wait goes on with it (kept across a restart).
        assert_eq!(
            step.execute_result.as_ref().unwrap().repairs,
            so_far.repairs
        );
        assert_eq!(
            step.execute_result.as_ref().unwrap()["params_filled"]["by"],
            "op"
        );
    }
}
