//! The schema of a send_message answer: a message to send, or a step to take first.

use crate::skills::answer_schema::{answer, line, object, step_request, text};
use crate::state::Agent;
use serde_json::{Value, json};

/// `<send_message>` or `<get_more_info>`.
pub fn answer_schema(agent: &Agent, agents: &[String]) -> Value {
    json!({
        "anyOf": [
            answer(&[("send_message", message(agent, agents))], &[]),
            answer(&[("get_more_info", step_request())], &[]),
        ]
    })
}

/// `<send_message>`: a message to another agent of the team (by name when `agents` lists
/// them), with an optional question for a person.
pub fn message(agent: &Agent, agents: &[String]) -> Value {
    let others: Vec<&String> = agents
        .iter()
        .filter(|a| **a != agent.agent_id.as_str())
        .collect();
    let receiver = if others.is_empty() {
        text()
    } else {
        json!({ "type": "string", "enum": others })
    };
    object(
        json!({
            "receiver": { "type": "array", "items": receiver, "minItems": 1 },
            "message": text(),
            "stage_relative": line(),
            "need_reply": { "type": "boolean" },
            "waiting": { "type": "boolean" },
            "ask": ask(),
        }),
        &["receiver", "message", "need_reply", "waiting"],
    )
}

/// A structured question for a person (`state::Ask`): optional.
fn ask() -> Value {
    let mode = |m: &str| json!({ "type": "string", "enum": [m] });
    // An option is a text, or a key with the label a person reads.
    let keyed = object(json!({ "key": line(), "label": line() }), &["key", "label"]);
    let options = json!({
        "type": "array", "items": { "anyOf": [line(), keyed] },
        "minItems": 2, "maxItems": crate::state::MAX_CHOICES,
    });
    let field = object(
        json!({
            "key": line(),
            "label": line(),
            "type": { "type": "string", "enum": ["text", "textarea", "number", "boolean", "select"] },
            "required": { "type": "boolean" },
            "options": { "type": "array", "items": line() },
            "description": line(),
            "max_length": { "type": "integer", "minimum": 1 },
        }),
        &["key", "type", "required"],
    );
    json!({ "anyOf": [
        object(json!({ "mode": mode("text") }), &["mode"]),
        object(
            json!({ "mode": mode("select"), "options": options, "multiple": { "type": "boolean" } }),
            &["mode", "options"],
        ),
        object(
            json!({ "mode": mode("form"), "fields": {
                "type": "array", "items": field, "minItems": 1, "maxItems": crate::state::MAX_CHOICES,
            }}),
            &["mode", "fields"],
        ),
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::answer_schema::answer_schema;
    use crate::skills::test_support::{agent, running};
    use crate::state::Skill;

    #[test]
    fn a_message_goes_to_another_agent_of_the_team() {
        let a = agent(&[Skill::SendMessage]);
        let step = running(&mut a.clone(), Skill::SendMessage, "");
        let team = ["w".to_owned(), "rook".to_owned()];
        let schema = answer_schema(Skill::SendMessage, &a, &step, &team);
        let send = &schema["anyOf"][0]["properties"]["send_message"];
        assert_eq!(
            send["properties"]["receiver"]["items"]["enum"],
            json!(["rook"])
        );
    }
}
