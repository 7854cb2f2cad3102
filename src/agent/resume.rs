//! An agent carrying on after a restart. A step that was running when the process stopped
//! has no result and never will: it is marked failed ("interrupted by a restart") so the
//! record says what happened. An LLM skill step is then run again (a copy goes to the front
//! of the queue: asking the model twice costs tokens, never a side effect). A tool step is not:
//! the tool may have acted before the process died, so calling it again could do it twice;
//! the agent carries on from the failure, as with any failed tool call.

use crate::event::StepUpdate;
use crate::state::{AgentState, Executor, StepExecutionState, StepState};
use serde_json::json;

/// What the failed step's result says.
pub const INTERRUPTED: &str = "interrupted by a restart";

/// Settles the steps that were running when the process stopped; returns how many are run
/// again. The changes are left in the agent's outbox, to publish when it starts.
pub fn resume_after_restart(agent: &mut AgentState) -> usize {
    let running: Vec<StepState> = agent
        .agent_step
        .steps()
        .iter()
        .filter(|s| s.execution_state == StepExecutionState::Running)
        .cloned()
        .collect();
    let mut again = Vec::new();
    for step in running {
        let rerun = matches!(step.executor, Executor::Skill(_));
        agent.update_step(
            &step.step_id,
            StepUpdate {
                execution_state: Some(StepExecutionState::Failed),
                execute_result: Some(json!({
                    "error": if rerun {
                        format!("{INTERRUPTED}; it runs again")
                    } else {
                        format!("{INTERRUPTED}; the tool is not called again, since it may have acted already")
                    }
                })),
                ..Default::default()
            },
        );
        if rerun {
            let mut copy = StepState::new(
                step.task_id.clone(),
                step.stage_id.clone(),
                step.agent_id.clone(),
                step.executor.clone(),
                step.step_intention.clone(),
                step.text_content.clone(),
            );
            copy.instruction_content = step.instruction_content.clone();
            copy.reply_to = step.reply_to.clone();
            again.push(copy);
        }
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
    use crate::state::Skill;

    fn agent_with_running(executor: Executor) -> (AgentState, StepState) {
        let mut a = AgentState::new("w".into(), "W".into(), "r".into(), "p".into());
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
            old.execute_result.as_ref().unwrap()["error"]
                .as_str()
                .unwrap()
                .contains(INTERRUPTED)
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
    fn an_interrupted_tool_step_is_never_called_again() {
        let (mut a, was) = agent_with_running(Executor::Tool("fs".into()));
        assert_eq!(resume_after_restart(&mut a), 0);
        assert_eq!(
            a.agent_step.get(&was.step_id).unwrap().execution_state,
            StepExecutionState::Failed
        );
        assert!(a.agent_step.next().is_none(), "no second call queued");
    }
}
