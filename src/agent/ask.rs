//! Structured questions to a person (see `state::Ask`): an agent's send_message may carry one
//! (`"ask"`); an agent asks at most `step_limits.asks` times in one stage (default 3); then it
//! goes on with what it has.

use crate::ids::{StageRef, TaskId};
use crate::state::{AgentState, Skill, StepState};

/// How many structured questions `agent` has put to people in `task`/`stage` (its
/// send_message steps that carried an ask; the stage's step list is capped, so is this).
pub fn asks_in_stage(agent: &AgentState, task: &TaskId, stage: &StageRef) -> usize {
    agent
        .agent_step
        .steps()
        .iter()
        .filter(|s| &s.task_id == task && &s.stage_id == stage && asked(s))
        .count()
}

/// Whether `step` sent a message carrying a question.
fn asked(step: &StepState) -> bool {
    step.executor.skill() == Some(Skill::SendMessage)
        && step
            .execute_result
            .as_ref()
            .and_then(|r| r.get("send_message")?.get("ask"))
            .is_some_and(|a| !a.is_null())
}
