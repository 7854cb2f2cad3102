//! What a tool step asks of its MCP server: the agent must be allowed that server, and an
//! instruction_generation step must have written the call. Checked before anything is sent.
//! What it took to get the call's last answer is kept with the step's result.

use crate::call::McpCall;
use crate::policy::tool_retry::ToolRetry;
use crate::policy::{Fired, Repair};
use crate::state::{Agent, StepState};

/// What a tool step's call took before its last answer: the tries made again after a passing
/// failure (`policy::tool_retry`) and the repairs made on the way (a refusal judged by the
/// model, arguments it wrote anew: `step::tool_refusal`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolAttempts {
    /// Each try that failed for a passing reason and was made again.
    pub retries: Vec<ToolRetry>,
    /// The repairs made to the call on the way (`RefusalJudged`, `ArgumentsReasked`).
    pub repairs: Vec<Fired>,
}

impl ToolAttempts {
    /// How many times `rule` fired on the way.
    pub fn fired(&self, rule: Repair) -> usize {
        self.repairs.iter().filter(|f| f.rule == rule).count()
    }
}

/// The call tool step `step` makes on MCP server `server`, or why it may not make one (in the
/// team's language: the tool_decision after a failed tool step reads it): the agent is not
/// allowed that server, or no instruction_generation step wrote the call.
pub fn tool_call_for(agent: &Agent, step: &StepState, server: &str) -> Result<McpCall, String> {
    let t = &agent.settings.texts;
    let offered = crate::state::offered_tools(agent, step);
    if !offered.iter().any(|o| *o == server) {
        let names: Vec<&str> = offered.iter().map(|o| o.as_str()).collect();
        return Err(t.tool_server_not_allowed(&agent.agent_id, server, names.join(", ")));
    }
    let instruction = step
        .instruction_content
        .as_ref()
        .ok_or_else(|| t.tool_no_instruction())?;
    McpCall::from_instruction(instruction).map_err(|e| e.render(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageRef;
    use crate::state::AgentState;
    use crate::state::Executor;
    use serde_json::json;

    fn setup(tools: &[&str], instruction: Option<serde_json::Value>) -> (Agent, StepState) {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "r".into(),
            "p".into(),
        ));
        a.tools = tools.iter().map(|t| t.to_string()).collect();
        let mut s = StepState::new(
            "t".into(),
            StageRef::NoRelative,
            "w".into(),
            Executor::Tool("ws".into()),
            "i",
            "",
        );
        s.instruction_content = instruction;
        (a, s)
    }

    #[test]
    fn a_permitted_server_with_an_instruction_gives_the_call() {
        let (a, s) = setup(
            &["ws"],
            Some(json!({"tool_name": "read_file", "arguments": {"path": "a"}})),
        );
        assert!(matches!(
            tool_call_for(&a, &s, "ws"),
            Ok(McpCall::Tool { .. })
        ));
    }

    #[test]
    fn a_forbidden_server_or_a_missing_instruction_is_refused_before_sending() {
        let (a, s) = setup(&["notes"], Some(json!({"tool_name": "x"})));
        assert!(
            tool_call_for(&a, &s, "ws")
                .unwrap_err()
                .contains("may not use")
        );
        let (a, s) = setup(&["ws"], None);
        assert!(
            tool_call_for(&a, &s, "ws")
                .unwrap_err()
                .contains("no instruction")
        );
    }

    #[test]
    fn a_chinese_agent_is_told_why_in_chinese() {
        let zh = crate::texts::Texts::builtin(crate::texts::Language::Zh);
        for (tools, instruction) in [
            (&["notes"], Some(json!({"tool_name": "x"}))),
            (&["ws"], None),
        ] {
            let (mut a, s) = setup(tools, instruction);
            a.settings_mut().texts = zh.clone();
            let why = tool_call_for(&a, &s, "ws").unwrap_err();
            let words = crate::texts::english_words(&why, &["notes"]);
            assert!(words.is_empty(), "{why}: {words:?}");
        }
    }
}
