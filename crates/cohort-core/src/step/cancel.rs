//! A person cancels one step (seed 000's STEP_CANCEL): queued, running, or waiting for a
//! person. It closes `cancelled` with who cancelled it and why (its result's `cancelled`); a call in flight for it is
//! abandoned by the actor; a sender waiting for its reply gets its wait id back; and an agent
//! left with nothing to run in the stage decides how to go on, as after a failure.

use super::complete::{StepCompletion, finish_output, opening, result_update};
use crate::ids::{AgentId, StepId};
use crate::state::{Agent, Cancelled, Executor, StageAgentState, StepExecutionState, StepResult};

/// Why a step could not be cancelled. Its text ([`CancelError::render`], in the team's
/// language) is what the REST API answers.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum CancelError {
    /// The agent has no step with this id.
    NoStep(AgentId, StepId),
    /// The step is over already: finished, failed or cancelled, as the state says.
    Over(StepId, StepExecutionState),
    /// The step's output is with SyncState and its closing is being stored; cancelling now
    /// would close it twice.
    Ending(StepId),
    /// The agent could not be asked (it runs on another node that did not answer), with why.
    Unavailable(String),
}

impl CancelError {
    /// Why, in the language of `t`.
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        match self {
            CancelError::NoStep(agent, step) => t.cancel_no_step(agent, step),
            CancelError::Over(step, state) => t.cancel_over(step, state),
            CancelError::Ending(step) => t.cancel_ending(step),
            CancelError::Unavailable(why) => t.cancel_unavailable(why),
        }
    }
}

/// In English, as logs show it.
impl std::fmt::Display for CancelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&crate::texts::Texts::english()))
    }
}

impl std::error::Error for CancelError {}

/// Why a cancelled step ended, as its result says (in the language of `t`: the tool_decision
/// after a cancelled call reads it).
pub fn cancel_reason(by: &AgentId, reason: &str, t: &crate::texts::Texts) -> String {
    match reason.trim() {
        "" => t.step_cancelled_by(by),
        r => t.step_cancelled_by_because(by, r),
    }
}

/// Whether step `id` of `agent` may be cancelled.
pub fn check_cancel(agent: &Agent, id: &StepId) -> Result<(), CancelError> {
    let step = agent
        .agent_step
        .get(id)
        .ok_or_else(|| CancelError::NoStep(agent.agent_id.clone(), id.clone()))?;
    if step.execution_state.is_over() {
        return Err(CancelError::Over(id.clone(), step.execution_state));
    }
    Ok(())
}

/// Marks step `id` cancelled by `by` (it leaves the queue); the reason. What was tried
/// before (repairs, a tool call's retries) stays on its result.
pub fn mark_cancelled(agent: &mut Agent, id: &StepId, by: &AgentId, reason: &str) -> String {
    let why = cancel_reason(by, reason, &agent.settings.texts);
    let before = agent
        .agent_step
        .get(id)
        .and_then(|s| s.execute_result.as_ref());
    let mut update = result_update(StepResult {
        cancelled: Some(Cancelled {
            by: Some(by.clone()),
            reason: reason.trim().to_owned(),
        }),
        repairs: before.map(|r| r.repairs.clone()).unwrap_or_default(),
        tool_retries: before.map(|r| r.tool_retries.clone()).unwrap_or_default(),
        ..StepResult::failed(why.clone())
    });
    update.execution_state = Some(StepExecutionState::Cancelled);
    agent.update_step(id, update);
    why
}

/// Ends step `id` as cancelled by `by` (check it with [`check_cancel`] first): its result
/// says so, and the completion goes to SyncState like any step's end.
pub fn cancel_step(
    agent: &mut Agent,
    id: &StepId,
    by: &AgentId,
    reason: &str,
    attempts: super::ToolAttempts,
) -> StepCompletion {
    let tool = agent
        .agent_step
        .get(id)
        .is_some_and(|s| matches!(s.executor, Executor::Tool(_)));
    if tool {
        // A tool call ends as any call does, so a tool_decision step follows and the agent
        // decides how to go on with the tool.
        let why = Err(cancel_reason(by, reason, &agent.settings.texts));
        let completion = super::complete_tool_step_after(agent, id, why, attempts);
        mark_cancelled(agent, id, by, reason);
        return completion;
    }
    // The step's result names who cancelled it: its closing (`Settle`) keeps that and closes
    // it `cancelled`.
    end_step(agent, id, |agent| mark_cancelled(agent, id, by, reason))
}

/// Ends step `id`, which waited for a person who never decided (or can no longer be asked),
/// as failed with `why`; like after a cancel, an agent left with nothing to run in the stage
/// decides how to go on.
pub fn fail_waiting_step(agent: &mut Agent, id: &StepId, why: String) -> StepCompletion {
    end_step(agent, id, |agent| {
        agent.update_step(id, result_update(StepResult::failed(why.clone())));
        why
    })
}

/// Ends step `id` with the reason `record` writes on it: the agent goes on in its stage, and
/// decides how when nothing else is left there.
fn end_step(
    agent: &mut Agent,
    id: &StepId,
    record: impl FnOnce(&mut Agent) -> String,
) -> StepCompletion {
    let Some((step, output, lock_before)) = opening(agent, id) else {
        return StepCompletion::vanished();
    };
    let why = record(agent);
    finish_output(
        agent,
        &step,
        StageAgentState::Working,
        Some(why),
        output,
        &lock_before,
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{StageId, StageRef};
    use crate::state::AgentState;
    use crate::state::{Skill, StepState};

    #[test]
    fn a_cancelled_step_says_who_and_why_and_an_ended_one_cannot_be() {
        let mut a = Agent::from(AgentState::new(
            "w".into(),
            "W".into(),
            "r".into(),
            "".into(),
        ));
        a.skills = vec![Skill::Think, Skill::Decision];
        let (task, stage) = (crate::ids::TaskId::from("t"), StageId::from("s"));
        a.open_goal(&task, &stage);
        let s = StepState::new(
            task,
            StageRef::Stage(stage),
            "w".into(),
            Executor::Skill(Skill::Think),
            "think",
            "",
        );
        let id = s.step_id.clone();
        a.add_steps(vec![s]);
        check_cancel(&a, &id).unwrap();
        let c = cancel_step(
            &mut a,
            &id,
            &"op".into(),
            " wrong idea ",
            Default::default(),
        );
        assert_eq!(c.failure.as_deref(), Some("cancelled by `op`: wrong idea"));
        let step = a.agent_step.get(&id).unwrap();
        assert_eq!(
            step.execute_result
                .as_ref()
                .unwrap()
                .cancelled
                .as_ref()
                .unwrap()
                .by,
            Some("op".into())
        );
        // Nothing else was planned: the agent decides how to go on.
        let next: Vec<&StepState> = a
            .agent_step
            .todo()
            .map(|i| a.agent_step.get(i).unwrap())
            .collect();
        assert_eq!(next.len(), 1, "the cancelled step left the queue");
        assert_eq!(next[0].executor, Executor::Skill(Skill::Decision));
        assert!(next[0].text_content.contains("cancelled by `op`"));
        assert_eq!(
            check_cancel(&a, &"nope".into()),
            Err(CancelError::NoStep("w".into(), "nope".into()))
        );
    }
}
