//! instruction_generation: writes the next tool step's `instruction_content` from
//! `<tool_instruction>`. (tool_decision, which follows every tool step, is a plan: `plan.rs`.)

pub(super) mod answer;

use super::{HistoryKind, Refusal, SkillError, SkillKind, SkillOutcome, answer_schema, working};
use crate::call::McpCall;
use crate::clock::Now;
use crate::event::StepUpdate;
use crate::state::{Agent, Executor, StepState};
use serde_json::{Value, json};

/// The tool step an instruction_generation step writes for: the next pending tool step of the
/// same task and stage.
pub fn next_tool_step<'a>(agent: &'a Agent, ig: &StepState) -> Option<&'a StepState> {
    agent
        .agent_step
        .todo()
        .filter_map(|id| agent.agent_step.get(id))
        .find(|s| {
            matches!(s.executor, Executor::Tool(_))
                && s.task_id == ig.task_id
                && s.stage_id == ig.stage_id
        })
}

/// Writes the instruction into the next tool step of the same task and stage.
pub fn interpret(
    agent: &mut Agent,
    step: &StepState,
    answer: &str,
) -> Result<SkillOutcome, SkillError> {
    let instruction = answer::read(answer)?;
    let target = next_tool_step(agent, step)
        .map(|s| s.step_id.clone())
        .ok_or(Refusal::NoToolStep)?;
    // Written even when malformed: the tool step then fails with the exact reason, and the
    // tool_decision after it sees that reason in the tool's call chain.
    agent.update_step(
        &target,
        StepUpdate {
            instruction_content: Some(instruction.clone()),
            ..Default::default()
        },
    );
    McpCall::from_instruction(&instruction).map_err(Refusal::ToolInstruction)?;
    Ok(working(
        json!({ "instruction_generation": instruction, "tool_step_id": target }),
    ))
}

/// instruction_generation: writes the next tool step's `instruction_content`.
pub struct InstructionGeneration;

impl SkillKind for InstructionGeneration {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<tool_instruction>"]
    }

    fn history(&self) -> HistoryKind {
        HistoryKind::None
    }

    fn answer_schema(&self, _agent: &Agent, _step: &StepState, _agents: &[String]) -> Value {
        answer_schema::answer(&[("tool_instruction", answer::schema())], &[])
    }

    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        _now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(agent, step, answer)
    }

    fn calls_tools(&self) -> bool {
        true
    }

    fn fills_a_tool_step(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::test_support::*;
    use crate::state::Skill;

    fn with_tool(a: &mut Agent, stage_of: &StepState) {
        a.tools = vec!["ws".into()];
        let tool = StepState::new(
            stage_of.task_id.clone(),
            stage_of.stage_id.clone(),
            "w".into(),
            Executor::Tool("ws".into()),
            "write",
            "",
        );
        a.add_steps(vec![tool]);
    }

    #[test]
    fn instruction_generation_fills_the_next_tool_step() {
        let mut a = agent(&[Skill::InstructionGeneration]);
        let ig = running(&mut a, Skill::InstructionGeneration, "");
        with_tool(&mut a, &ig);
        let o = interpret(
            &mut a,
            &ig,
            r#"<tool_instruction>{"tool_name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}</tool_instruction>"#,
        )
        .unwrap();
        let tool = next_tool_step(&a, &ig).unwrap();
        assert_eq!(
            tool.instruction_content.as_ref().unwrap()["tool_name"],
            "write_file"
        );
        assert_eq!(o.result["tool_step_id"], tool.step_id.as_str());
    }

    #[test]
    fn instruction_generation_without_a_tool_step_or_with_a_bad_call_fails() {
        let mut a = agent(&[Skill::InstructionGeneration]);
        let ig = running(&mut a, Skill::InstructionGeneration, "");
        let e = interpret(
            &mut a,
            &ig,
            r#"<tool_instruction>{"tool_name": "x"}</tool_instruction>"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no tool step follows"));
        with_tool(&mut a, &ig);
        let e = interpret(
            &mut a,
            &ig,
            r#"<tool_instruction>{"what": "x"}</tool_instruction>"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("names no capability"), "{e}");
        // The malformed call still reaches the tool step, which then fails with this reason.
        let tool = next_tool_step(&a, &ig).unwrap();
        assert_eq!(tool.instruction_content.as_ref().unwrap()["what"], "x");
        let why = crate::step::tool_call_for(&a, tool, "ws").unwrap_err();
        assert!(why.contains("names no capability"), "{why}");
    }
}
