//! An agent carrying on after a restart. A step that was running when the process stopped
//! has no result and never will. An LLM skill step is marked failed ("interrupted by a
//! restart") and run again (a copy goes to the front of the queue: asking the model twice
//! costs tokens, never a side effect). A tool step is run again only when its call is harmless
//! to repeat (the MCP tool declares itself read-only or idempotent; the actor asks the server
//! when it starts). Otherwise the tool may have acted before the process died, so it is not
//! called again: its actor settles it as a failed call ([`interrupted_tool_steps`]), and the
//! agent goes on as after any failed tool call (a tool_decision sees why).

use crate::event::StepUpdate;
use crate::state::{Agent, Executor, StepExecutionState, StepResult, StepState};
use crate::texts::Texts;

/// Why an interrupted tool step failed, in the language of `t` (the tool_decision after it
/// reads it).
pub fn interrupted_tool_call(t: &Texts) -> String {
    t.interrupted_tool_call()
}

/// The tool steps that were running when the process stopped (to settle as failed calls).
pub fn interrupted_tool_steps(agent: &Agent) -> Vec<crate::ids::StepId> {
    agent
        .agent_step
        .steps()
        .iter()
        .filter(|s| {
            s.execution_state == StepExecutionState::Running
                && matches!(s.executor, Executor::Tool(_))
        })
        .map(|s| s.step_id.clone())
        .collect()
}

/// Settles the LLM steps that were running when the process stopped; returns how many are
/// run again. The changes are left in the agent's outbox, to publish when it starts.
pub fn resume_after_restart(agent: &mut Agent) -> usize {
    let running: Vec<StepState> = agent
        .agent_step
        .steps()
        .iter()
        .filter(|s| {
            s.execution_state == StepExecutionState::Running
                && matches!(s.executor, Executor::Skill(_))
        })
        .cloned()
        .collect();
    let mut again = Vec::new();
    for step in running {
        let mut copy = StepState::new(
            step.task_id.clone(),
            step.stage_id.clone(),
            step.agent_id.clone(),
            step.executor.clone(),
            step.step_intention.clone(),
            step.text_content.clone(),
        );
        copy.origin = step.origin;
        copy.instruction_content = step.instruction_content;
        copy.reply_to = step.reply_to;
        // A graph plan's step keeps its place in the plan (its dependencies had finished).
        copy.plan_id = step.plan_id;
        copy.depends_on = step.depends_on;
        agent.update_step(
            &step.step_id,
            StepUpdate {
                execution_state: Some(StepExecutionState::Failed),
                execute_result: Some(Box::new(StepResult {
                    runs_again_as: Some(copy.step_id.clone()),
                    ..StepResult::failed(agent.settings.texts.interrupted_runs_again())
                })),
                ..Default::default()
            },
        );
        again.push(copy);
    }
    let n = again.len();
    if n > 0 {
        agent.add_next_steps(again);
    }
    agent.refresh_working_state();
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{StageId, StageRef};
    use crate::state::AgentState;
    use crate::state::Skill;

    fn agent_with_running(executor: Executor) -> (Agent, StepState) {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "r".into(),
            "p".into(),
        ));
        let stage = StageRef::Stage(StageId::from("s"));
        a.note_working_memory("t".into(), Some(stage.clone()));
        let s = StepState::new("t".into(), stage, "w".into(), executor, "do it", "details");
        a.add_steps(vec![s]);
        let running = a.start_next().unwrap();
        a.take_changes();
        (a, running)
    }

    #[test]
    fn an_interrupted_llm_step_is_failed_on_record_and_runs_again() {
        let (mut a, was) = agent_with_running(Executor::Skill(Skill::Think));
        assert_eq!(resume_after_restart(&mut a), 1);
        let old = a.agent_step.get(&was.step_id).unwrap();
        assert_eq!(old.execution_state, StepExecutionState::Failed);
        assert!(
            old.execute_result
                .as_ref()
                .unwrap()
                .error
                .as_deref()
                .unwrap()
                .contains("interrupted by a restart")
        );
        let next = a.agent_step.next().unwrap();
        assert_ne!(next.step_id, was.step_id);
        assert_eq!(
            (next.step_intention.as_str(), next.executor.clone()),
            ("do it", Executor::Skill(Skill::Think))
        );
        assert!(!a.take_changes().is_empty(), "readers are told");
    }

    #[test]
    fn an_interrupted_tool_step_is_never_called_again_but_settled_as_a_failed_call() {
        let (mut a, was) = agent_with_running(Executor::Tool("fs".into()));
        assert_eq!(resume_after_restart(&mut a), 0);
        assert!(a.agent_step.next().is_none(), "no second call queued");
        assert_eq!(
            interrupted_tool_steps(&a),
            std::slice::from_ref(&was.step_id)
        );
        // Settled as the actor does: the ordinary path of a failed tool call.
        let why = interrupted_tool_call(&a.settings.texts);
        crate::step::complete_tool_step(&mut a, &was.step_id, Err(why));
        let s = a.agent_step.get(&was.step_id).unwrap();
        assert!(
            s.execute_result
                .as_ref()
                .unwrap()
                .error
                .as_deref()
                .unwrap()
                .contains("interrupted by a restart")
        );
        let next = a.agent_step.next().expect("a tool_decision follows");
        assert_eq!(next.executor, Executor::Skill(Skill::ToolDecision));
    }
}
