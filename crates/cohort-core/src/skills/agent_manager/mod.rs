//! agent_manager: an `<agent_instruction>` for SyncState (init_new_agent, add_task_participant).
//! Whether the template and ids exist is SyncState's to judge; here only the shape is checked.

use super::answer_schema::{answer, line, variant};
use super::{HistoryKind, Refusal, SkillError, SkillKind, SkillOutcome, working};
use crate::clock::Now;
use crate::message::AgentInstruction;
use crate::parse::{ParseError, tagged_variant};
use crate::state::{Agent, StepState};
use serde_json::{Value, json};

/// agent_manager: manages agents (init_new_agent, add_task_participant).
pub struct AgentManager;

impl SkillKind for AgentManager {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<agent_instruction>"]
    }

    fn contract_words(&self) -> &'static [&'static str] {
        &["init_new_agent", "add_task_participant"]
    }

    fn history(&self) -> HistoryKind {
        HistoryKind::Stage
    }

    fn answer_schema(&self, _agent: &Agent, _step: &StepState, _agents: &[String]) -> Value {
        answer(&[("agent_instruction", agent_instruction())], &[])
    }

    fn interpret(
        &self,
        _agent: &mut Agent,
        _step: &StepState,
        answer: &str,
        _now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(answer)
    }

    fn acts_through_the_team(&self) -> bool {
        true
    }
}

/// `<agent_instruction>`: init_new_agent or add_task_participant.
fn agent_instruction() -> Value {
    json!({ "anyOf": [
        variant("action", "init_new_agent",
            json!({ "template": line(), "agent_id": line(), "name": line() }),
            &["template", "agent_id"]),
        variant("action", "add_task_participant",
            json!({ "task_id": line(), "agent_id": line() }),
            &["task_id", "agent_id"]),
    ]})
}

/// `<agent_instruction>{"action": "init_new_agent" | "add_task_participant", …}`.
pub(super) fn read(text: &str) -> Result<AgentInstruction, ParseError> {
    tagged_variant(text, "agent_instruction", "action", |_| {})
}

/// The instruction for SyncState, its new agent's id checked and its name filled in.
pub fn interpret(answer: &str) -> Result<SkillOutcome, SkillError> {
    let mut instruction = read(answer)?;
    if let AgentInstruction::InitNewAgent { agent_id, name, .. } = &mut instruction {
        let id = agent_id.as_str().trim().to_owned();
        crate::ids::check_agent_id(&id).map_err(Refusal::BadAgentId)?;
        *agent_id = id.as_str().into();
        if name.as_deref().is_none_or(|n| n.trim().is_empty()) {
            *name = Some(id);
        }
    }
    Ok(SkillOutcome {
        agent_instruction: Some(instruction.clone()),
        ..working(json!({ "agent_instruction": instruction }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_instructions_are_read_with_forgiving_action_names() {
        let i = read(r#"<agent_instruction>{"action": "Init-New-Agent", "template": "analyst", "agent_id": "ana", "name": null}</agent_instruction>"#).unwrap();
        assert_eq!(
            i,
            AgentInstruction::InitNewAgent {
                template: "analyst".into(),
                agent_id: "ana".into(),
                name: None
            }
        );
        let i = read(r#"<agent_instruction>[{"action": "add_task_participant", "task_id": "t", "agent_id": "a"}]</agent_instruction>"#).unwrap();
        assert_eq!(
            i,
            AgentInstruction::AddTaskParticipant {
                task_id: "t".into(),
                agent_id: "a".into()
            }
        );
        let e =
            read(r#"<agent_instruction>{"action": "fire_agent"}</agent_instruction>"#).unwrap_err();
        assert!(e.to_string().contains("init_new_agent"), "{e}");
        let e = read(r#"<agent_instruction>{"action": "init_new_agent", "agent_id": "x"}</agent_instruction>"#).unwrap_err();
        assert!(e.to_string().contains("template"), "{e}");
    }

    #[test]
    fn init_new_agent_gets_a_name_and_a_trimmed_id() {
        let o = interpret(r#"<agent_instruction>{"action": "init_new_agent", "template": "analyst", "agent_id": " ana "}</agent_instruction>"#).unwrap();
        assert_eq!(
            o.agent_instruction.unwrap(),
            AgentInstruction::InitNewAgent {
                template: "analyst".into(),
                agent_id: "ana".into(),
                name: Some("ana".into())
            }
        );
        assert_eq!(o.result["agent_instruction"]["action"], "init_new_agent");
    }

    #[test]
    fn unusable_ids_and_unknown_actions_fail() {
        for bad in ["a b", "[TaskState]", "", "<x>"] {
            let answer = format!(
                r#"<agent_instruction>{{"action": "init_new_agent", "template": "t", "agent_id": "{bad}"}}</agent_instruction>"#
            );
            assert!(interpret(&answer).is_err(), "{bad}");
        }
        assert!(interpret(r#"<agent_instruction>{"action": "fire"}</agent_instruction>"#).is_err());
        assert!(interpret("no tag").is_err());
    }
}
