//! agent_manager: an `<agent_instruction>` for SyncState (init_new_agent, add_task_participant).
//! Whether the template and ids exist is SyncState's to judge; here only the shape is checked.

use super::{Refusal, SkillError, SkillOutcome, working};
use crate::message::AgentInstruction;
use crate::parse;
use serde_json::json;

pub fn interpret(answer: &str) -> Result<SkillOutcome, SkillError> {
    let mut instruction = parse::agent_instruction(answer)?;
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
