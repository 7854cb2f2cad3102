//! Turning a finished LLM call into a step result: interpret the answer with the step's skill,
//! record tokens, and build the `ExecuteOutput` for SyncState. The step stays `running` until
//! SyncState has applied that output (`settle_step`), so "finished" means its effects happened.

use crate::ids::{StepId, WaitId};
use crate::llm::ChatReply;
use crate::message::{CompletionUpdate, ExecuteOutput, SharedInfoUpdate, StageAgentUpdate};
use crate::skills;
use crate::state::{AgentState, StageAgentState, StepExecutionState, StepState};
use chrono::NaiveDateTime;
use serde_json::json;

/// What finishing a step's LLM call produced.
#[derive(Debug)]
pub struct StepCompletion {
    /// For SyncState; sent whether the step succeeded or failed (a failure updates the stage).
    pub output: ExecuteOutput,
    /// Why the step failed, if it did.
    pub failure: Option<String>,
    /// Wait ids this step put on the step lock, to take back if SyncState refuses the message.
    pub added_waits: Vec<WaitId>,
}

pub fn complete_step(
    agent: &mut AgentState,
    step_id: &StepId,
    reply: Result<ChatReply, String>,
    now: NaiveDateTime,
) -> StepCompletion {
    let Some(step) = agent.agent_step.get(step_id).cloned() else {
        return StepCompletion {
            output: ExecuteOutput::default(),
            failure: Some("step vanished".into()),
            added_waits: vec![],
        };
    };
    let lock_before = agent.step_lock.len();
    let (result, failure, mut output, stage_state) = match reply {
        Err(e) => (
            json!({ "error": e }),
            Some(e),
            ExecuteOutput::default(),
            StageAgentState::Failed,
        ),
        Ok(reply) => {
            agent.token_usage.add(reply.usage);
            if let Some(s) = agent.agent_step.get_mut(step_id) {
                s.token_usage = reply.usage;
            }
            let mut output = ExecuteOutput {
                token_usage: Some((step.task_id.clone(), reply.usage)),
                ..Default::default()
            };
            match skills::interpret(agent, &step, &reply.text, now) {
                Ok(o) => {
                    output.send_message = o.send_message;
                    output.task_instruction = o.task_instruction;
                    if let (Some(summary), Some(stage)) = (o.completion, step.stage_id.stage()) {
                        output.update_stage_agent_completion = Some(CompletionUpdate {
                            task_id: step.task_id.clone(),
                            stage_id: stage.clone(),
                            agent_id: agent.agent_id.clone(),
                            completion_summary: summary,
                        });
                    }
                    (o.result, None, output, o.stage_state)
                }
                Err(e) => {
                    let reason = format!("{} step failed: {e}", step.executor);
                    (
                        json!({ "error": reason, "answer": reply.text }),
                        Some(reason),
                        output,
                        StageAgentState::Failed,
                    )
                }
            }
        }
    };
    if let Some(s) = agent.agent_step.get_mut(step_id) {
        s.execute_result = Some(result);
    }
    output.agent_id = Some(agent.agent_id.clone());
    if let Some(stage) = step.stage_id.stage() {
        output.update_stage_agent_state = Some(StageAgentUpdate {
            task_id: step.task_id.clone(),
            stage_id: stage.clone(),
            agent_id: agent.agent_id.clone(),
            state: stage_state,
        });
    }
    output.send_shared_info = Some(shared_info(agent, &step, failure.is_none()));
    let added_waits = agent.step_lock[lock_before..].to_vec();
    StepCompletion {
        output,
        failure,
        added_waits,
    }
}

/// Closes a step once SyncState answered: finished, or failed with SyncState's reason (then
/// the wait ids it added are taken back, since its message was never sent).
pub fn settle_step(
    agent: &mut AgentState,
    step_id: &StepId,
    failure: Option<String>,
    added_waits: &[WaitId],
) {
    if failure.is_some() {
        agent.step_lock.retain(|w| !added_waits.contains(w));
    }
    if let Some(s) = agent.agent_step.get_mut(step_id) {
        match failure {
            None => s.execution_state = StepExecutionState::Finished,
            Some(reason) => {
                s.execution_state = StepExecutionState::Failed;
                let answer = s
                    .execute_result
                    .as_ref()
                    .and_then(|r| r.get("answer"))
                    .cloned();
                s.execute_result = Some(match answer {
                    Some(a) => json!({ "error": reason, "answer": a }),
                    None => json!({ "error": reason }),
                });
            }
        }
    }
}

fn shared_info(agent: &AgentState, step: &StepState, ok: bool) -> SharedInfoUpdate {
    SharedInfoUpdate {
        task_id: step.task_id.clone(),
        stage_id: step.stage_id.clone(),
        agent_id: agent.agent_id.clone(),
        role: agent.role.clone(),
        content: format!(
            "{} step \"{}\": {}",
            step.executor,
            step.step_intention,
            if ok { "finished" } else { "failed" }
        ),
    }
}

/// The reason recorded on steps removed before they could run.
pub fn drop_reason(why: &str) -> String {
    format!("dropped before it ran: {why}")
}

/// Of the steps finish_stage/finish_task removed, returns those that never ran, marked failed
/// with the reason (for publishing); steps already finished or failed keep their record.
pub fn mark_dropped(steps: Vec<StepState>, why: &str) -> Vec<StepState> {
    steps
        .into_iter()
        .filter(|s| !s.execution_state.is_over())
        .map(|mut s| {
            s.execution_state = StepExecutionState::Failed;
            s.execute_result = Some(json!({ "error": drop_reason(why) }));
            s
        })
        .collect()
}
