//! instruction_generation (writes the next tool step's `instruction_content` from
//! `<tool_instruction>`) and tool_decision (after a tool step: `<planned_step>` with an
//! instruction_generation + tool pair to go on, inserted next, or `[]` to stop).

use super::plan::check_plan;
use super::{SkillError, SkillOutcome, working};
use crate::mcp::McpCall;
use crate::parse;
use crate::state::{AgentState, Executor, Skill, StepState};
use serde_json::json;

/// The tool step an instruction_generation step writes for: the next pending tool step of the
/// same task and stage.
pub fn next_tool_step<'a>(agent: &'a AgentState, ig: &StepState) -> Option<&'a StepState> {
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

pub fn instruction_generation(
    agent: &mut AgentState,
    step: &StepState,
    answer: &str,
) -> Result<SkillOutcome, SkillError> {
    let instruction = parse::tool_instruction(answer)?;
    // Checked here so a malformed call fails this step, with the reason, not the tool step.
    McpCall::from_instruction(&instruction).map_err(SkillError::Invalid)?;
    let target = next_tool_step(agent, step)
        .map(|s| s.step_id.clone())
        .ok_or_else(|| {
            SkillError::Invalid("no tool step follows this instruction_generation step".into())
        })?;
    if let Some(tool) = agent.agent_step.get_mut(&target) {
        tool.instruction_content = Some(instruction.clone());
    }
    Ok(working(
        json!({ "instruction_generation": instruction, "tool_step_id": target }),
    ))
}

pub fn tool_decision(
    agent: &mut AgentState,
    step: &StepState,
    answer: &str,
) -> Result<SkillOutcome, SkillError> {
    let raw = parse::planned_steps(answer)?;
    if raw.is_empty() {
        return Ok(working(json!({ "tool_decision": [], "stop": true })));
    }
    let (accepted, rejected) = check_plan(raw, agent, Skill::ToolDecision);
    if accepted.is_empty() {
        return Err(SkillError::EmptyPlan(rejected.join("; ")));
    }
    let result = json!({ "tool_decision": accepted, "rejected": rejected, "stop": false });
    let steps = accepted
        .into_iter()
        .map(|p| {
            p.into_step(
                step.task_id.clone(),
                step.stage_id.clone(),
                agent.agent_id.clone(),
            )
        })
        .collect();
    agent.add_next_steps(steps);
    Ok(working(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::test_support::*;

    fn with_tool(a: &mut AgentState, stage_of: &StepState) {
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
        let o = instruction_generation(&mut a, &ig, r#"<tool_instruction>{"tool_name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}</tool_instruction>"#).unwrap();
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
        let e = instruction_generation(
            &mut a,
            &ig,
            r#"<tool_instruction>{"tool_name": "x"}</tool_instruction>"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no tool step follows"));
        with_tool(&mut a, &ig);
        let e = instruction_generation(
            &mut a,
            &ig,
            r#"<tool_instruction>{"what": "x"}</tool_instruction>"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("names no capability"), "{e}");
    }

    #[test]
    fn tool_decision_continues_with_a_pair_inserted_next_or_stops() {
        let mut a = agent(&[
            Skill::ToolDecision,
            Skill::InstructionGeneration,
            Skill::Reflection,
        ]);
        a.tools = vec!["ws".into()];
        let td = running(&mut a, Skill::ToolDecision, "");
        a.add_steps(vec![StepState::new(
            "t".into(),
            td.stage_id.clone(),
            "w".into(),
            Executor::Skill(Skill::Reflection),
            "later",
            "",
        )]);
        let o = tool_decision(&mut a, &td, r#"<planned_step>[{"step_intention": "next call", "type": "skill", "executor": "instruction_generation", "text_content": "read a.txt"}, {"step_intention": "read", "type": "tool", "executor": "ws", "text_content": "read it"}]</planned_step>"#).unwrap();
        assert_eq!(o.result["stop"], false);
        let todo: Vec<String> = a
            .agent_step
            .todo()
            .map(|id| a.agent_step.get(id).unwrap().executor.to_string())
            .collect();
        assert_eq!(todo, ["instruction_generation", "ws", "reflection"]);
        let o = tool_decision(&mut a, &td, "<planned_step>[]</planned_step>").unwrap();
        assert_eq!(o.result["stop"], true);
    }
}
