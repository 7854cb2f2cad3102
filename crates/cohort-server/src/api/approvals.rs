//! Tool calls and plans waiting for a person: `GET /api/approvals` lists those the caller may
//! see (`kind`: `tool_call` or `plan`); an operator approves one
//! (`POST /api/step/{id}/approve`: a tool call with `{args_hash, arguments?}`, the hash of the
//! arguments they saw and edited arguments if any; a plan with `{plan_hash, steps?}`, the
//! plan's hash and an edited list of steps if any), fills in the arguments a call waits for
//! (`POST /api/step/{id}/params {values}`, `kind` `params`), answers what a server asks during
//! a call (the same route, `kind` `elicitation`; a rejection declines it) or rejects it
//! (`POST /api/step/{id}/reject {reason}`: the call fails, the plan is planned again). The
//! agent takes the verdict (see `step::approval`, `step::plan_check`): a stale hash or a
//! step no longer waiting is 409, an edit that cannot run 422.

use super::error::{ApiJson, ApiPath};
use super::reason::{Fault, Malformed, OperatorAction, Refused};
use super::{ApiState, AppError, Caller};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use cohort_core::ids::{AgentId, StepId, TaskId};
use cohort_core::state::{Executor, StepExecutionState};
use cohort_core::step::approval::{DUE, Verdict};
use cohort_core::step::cancel::CancelError;
use cohort_core::step::params;
use cohort_core::step::plan_check::{self, EditedStep};
use cohort_runtime::actors::{CancelStep, CancelStepFor, ControlRefused, Decide, DecideFor};
use serde::Deserialize;
use serde_json::{Value, json};

/// `GET /api/approvals` → `{"approvals": [{kind, step_id, agent_id, task_id, stage_id,
/// step_intention, …}]}`, oldest step first; a `tool_call` adds server, tool, arguments,
/// args_hash, risk and reason, a `plan` adds steps and plan_hash.
pub async fn approvals(
    State(state): State<ApiState>,
    caller: Caller,
) -> Result<Json<Value>, AppError> {
    let list: Vec<Value> = state.inner.monitor.read(|s| {
        let view = caller.view(s);
        s.steps()
            .filter(|st| st.execution_state.waits_for_a_person())
            .filter(|st| view.sees_step_state(st))
            .map(|st| {
                let mut item = json!({
                    "step_id": st.step_id, "agent_id": st.agent_id, "task_id": st.task_id,
                    "stage_id": st.stage_id, "step_intention": st.step_intention,
                });
                for (key, kind) in [
                    ("waiting_for_approval", "tool_call"),
                    (plan_check::KEY, "plan"),
                    (params::KEY, "params"),
                    (cohort_core::step::elicitation::KEY, "elicitation"),
                ] {
                    if let Some(Value::Object(req)) =
                        st.execute_result.as_ref().and_then(|r| r.get(key))
                    {
                        item["kind"] = json!(kind);
                        for (k, v) in req {
                            item[k] = v.clone();
                        }
                        if let Some(due) = st.execute_result.as_ref().and_then(|r| r.get(DUE)) {
                            item[DUE] = due.clone();
                        }
                    }
                }
                item
            })
            .collect()
    });
    Ok(Json(json!({ "approvals": list })))
}

/// A tool call's approval (`args_hash`, `arguments`) or a plan's (`plan_hash`, `steps`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    #[serde(default)]
    pub args_hash: Option<String>,
    #[serde(default)]
    pub arguments: Option<Value>,
    #[serde(default)]
    pub plan_hash: Option<String>,
    #[serde(default)]
    pub steps: Option<Vec<EditedStep>>,
    #[serde(default)]
    pub stages: Option<Vec<EditedStage>>,
}

/// One stage of an operator's edited stage plan (its fields as the model writes them; an
/// unknown one is refused, where the model's own plans are read leniently).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditedStage {
    pub stage_intention: String,
    pub agent_allocation: std::collections::BTreeMap<cohort_core::ids::AgentId, String>,
}

impl From<EditedStage> for cohort_core::message::StagePlan {
    fn from(e: EditedStage) -> Self {
        cohort_core::message::StagePlan {
            stage_intention: e.stage_intention,
            agent_allocation: e.agent_allocation,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RejectBody {
    pub reason: String,
    /// What a rejected tool call leads to (default: as seed 000 says, the task is cancelled).
    #[serde(default)]
    pub then: Option<AfterReject>,
}

/// What a person's rejection of a waiting step leads to.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AfterReject {
    /// The step fails with the reason, which the agent reads and goes on from (a plan is
    /// planned again, a server's question declined).
    Skip,
    /// The task is cancelled with the reason (seed 000 §5.2: cancelling at a confirmation
    /// ends the flow): the step is cancelled with it, and the goal's giver is told.
    CancelTask,
}

/// `POST /api/step/{id}/approve`.
pub async fn approve(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<StepId>,
    ApiJson(body): ApiJson<ApproveBody>,
) -> Result<Json<Value>, AppError> {
    let verdict = match body {
        ApproveBody {
            args_hash: Some(args_hash),
            plan_hash: None,
            steps: None,
            stages: None,
            arguments,
        } => Verdict::Approve {
            args_hash,
            arguments,
        },
        ApproveBody {
            plan_hash: Some(plan_hash),
            args_hash: None,
            arguments: None,
            steps,
            stages: None,
        } => Verdict::ApprovePlan { plan_hash, steps },
        ApproveBody {
            plan_hash: Some(plan_hash),
            args_hash: None,
            arguments: None,
            steps: None,
            stages: Some(stages),
        } => Verdict::ApproveStages {
            plan_hash,
            stages: stages.into_iter().map(Into::into).collect(),
        },
        _ => {
            return Err(AppError::BadRequest(Malformed::ApproveShape.into()));
        }
    };
    give(&state, &caller, id, verdict).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamsBody {
    pub values: Value,
}

/// `POST /api/step/{id}/params {values}`: the fields a call waiting for parameters asked for.
pub async fn fill_params(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<StepId>,
    ApiJson(body): ApiJson<ParamsBody>,
) -> Result<Json<Value>, AppError> {
    if !body.values.is_object() {
        return Err(AppError::BadRequest(Malformed::ValuesNotObject.into()));
    }
    give(
        &state,
        &caller,
        id,
        Verdict::FillParams {
            values: body.values,
        },
    )
    .await
}

/// `POST /api/step/{id}/reject {reason, then?}`: a tool call's rejection cancels its task
/// unless `then` is `skip` (seed 000 §5.2); any other waiting step's fails it (`skip`) unless
/// `then` is `cancel_task`. A step of the base task (which never ends) is only skipped.
pub async fn reject(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<StepId>,
    ApiJson(body): ApiJson<RejectBody>,
) -> Result<Json<Value>, AppError> {
    let agent = super::control::operator_step(&state, &caller, &id, OperatorAction::Decide)?;
    let waiting = state.inner.monitor.read(|s| {
        s.step(&id)
            .filter(|st| st.execution_state.waits_for_a_person())
            .map(|st| {
                let approval = st.execution_state == StepExecutionState::WaitingForApproval
                    && matches!(st.executor, Executor::Tool(_));
                (st.task_id.clone(), approval)
            })
    });
    let Some((task, tool_call)) = waiting else {
        let step = id.clone();
        return Err(AppError::Rejected(
            StatusCode::CONFLICT,
            Refused::NotWaitingForVerdict { step }.into(),
        ));
    };
    let in_base = task == state.inner.base_task;
    let then = after_reject(body.then, tool_call, in_base)
        .map_err(|why| AppError::Rejected(StatusCode::CONFLICT, why.into()))?;
    match then {
        AfterReject::Skip => {
            let verdict = Verdict::Reject {
                reason: body.reason,
            };
            give(&state, &caller, id, verdict).await
        }
        AfterReject::CancelTask => {
            // Both halves are done whatever becomes of the request: dropped by a client gone
            // between them, the task's cancel would be skipped (an actor does not handle a
            // message whose asker left) with the step already cancelled, and a retry refused
            // as no longer waiting.
            let whole = async move {
                cancel_task_at(&state, &caller, (agent, id), task, body.reason).await
            };
            tokio::spawn(whole).await.map_err(|e| {
                let detail = e.to_string();
                AppError::Internal(Fault::Internal { detail }.into())
            })?
        }
    }
}

/// What a rejection leads to: `asked`, else a tool call's cancels its task (seed 000) and any
/// other's is skipped; a step of the base task, which never ends, is only skipped.
fn after_reject(
    asked: Option<AfterReject>,
    tool_call: bool,
    in_base: bool,
) -> Result<AfterReject, Refused> {
    match asked {
        Some(AfterReject::CancelTask) if in_base => Err(Refused::BaseTaskNotCancelled),
        Some(then) => Ok(then),
        None if tool_call && !in_base => Ok(AfterReject::CancelTask),
        None => Ok(AfterReject::Skip),
    }
}

/// Cancels the waiting step `id` of `agent` (seed 000's STEP_CANCEL), then its task (the
/// FLOW_CANCEL), both for `reason`; the goal's giver is told as of any cancelled task.
async fn cancel_task_at(
    state: &ApiState,
    caller: &Caller,
    (agent, id): (AgentId, StepId),
    task: TaskId,
    reason: String,
) -> Result<Json<Value>, AppError> {
    if reason.trim().is_empty() {
        return Err(AppError::Rejected(
            StatusCode::UNPROCESSABLE_ENTITY,
            Refused::RejectionNeedsReason.into(),
        ));
    }
    let step = CancelStep {
        step_id: id.clone(),
        by: caller.0.clone(),
        reason: reason.clone(),
    };
    let cancelled = state
        .inner
        .dispatcher
        .send(CancelStepFor(agent, step))
        .await;
    match cancelled? {
        // Over already (decided on meanwhile): the task is cancelled all the same.
        Ok(()) | Err(ControlRefused::NotCancelled(CancelError::Over(..))) => {}
        Err(e) => {
            let why = super::control::control_reason(e);
            return Err(AppError::Rejected(StatusCode::CONFLICT, why));
        }
    }
    let cancel = cohort_runtime::actors::CancelTask {
        task_id: task.clone(),
        by: caller.0.clone(),
        reason,
    };
    let answer = state.inner.sync.send(cancel).await;
    let ok = json!({ "success": true, "step_id": id, "task_id": task, "cancelled": true });
    super::control::sync_reply(answer, ok)
}

async fn give(
    state: &ApiState,
    caller: &Caller,
    id: StepId,
    verdict: Verdict,
) -> Result<Json<Value>, AppError> {
    // A member may not see most steps; one they see they still may not decide on.
    let agent = super::control::operator_step(state, caller, &id, OperatorAction::Decide)?;
    let decide = Decide {
        step_id: id.clone(),
        by: caller.0.clone(),
        verdict,
    };
    let answer = state
        .inner
        .dispatcher
        .send(DecideFor(agent, decide))
        .await?;
    match answer {
        Ok(()) => Ok(Json(json!({ "success": true, "step_id": id }))),
        Err(e) => Err(super::control::unreached(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejected_call_cancels_its_task_unless_skipped_or_in_the_base_task() {
        use AfterReject::{CancelTask, Skip};
        assert_eq!(
            after_reject(None, true, false),
            Ok(CancelTask),
            "seed 000's default"
        );
        assert_eq!(after_reject(Some(Skip), true, false), Ok(Skip));
        assert_eq!(
            after_reject(None, false, false),
            Ok(Skip),
            "a plan is planned again"
        );
        assert_eq!(after_reject(Some(CancelTask), false, false), Ok(CancelTask));
        assert_eq!(
            after_reject(None, true, true),
            Ok(Skip),
            "the base task never ends"
        );
        assert!(matches!(
            after_reject(Some(CancelTask), true, true),
            Err(Refused::BaseTaskNotCancelled)
        ));
    }
}
