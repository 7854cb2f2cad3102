//! Tool calls waiting for a person: `GET /api/approvals` lists those the caller may see;
//! an operator approves one (`POST /api/step/{id}/approve {args_hash, arguments?}`, the hash of
//! the arguments they saw, and edited arguments if any) or rejects it
//! (`POST /api/step/{id}/reject {reason}`). The agent takes the verdict (see
//! `agent::approval`): a stale hash or a step no longer waiting is 409.

use super::error::{ApiJson, ApiPath};
use super::{ApiState, AppError, Caller};
use crate::actors::{ControlRefused, Decide, DecideFor};
use crate::agent::approval::{Verdict, VerdictError};
use crate::ids::StepId;
use crate::state::StepExecutionState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

/// `GET /api/approvals` → `{"approvals": [{step_id, agent_id, task_id, stage_id,
/// step_intention, server, tool, arguments, args_hash, risk, reason}]}`, oldest step first.
pub async fn approvals(
    State(state): State<ApiState>,
    caller: Caller,
) -> Result<Json<Value>, AppError> {
    let list: Vec<Value> = state.inner.monitor.read(|s| {
        let view = caller.view(s);
        s.steps()
            .filter(|st| st.execution_state == StepExecutionState::WaitingForApproval)
            .filter(|st| view.sees_task(&st.task_id))
            .map(|st| {
                let mut item = json!({
                    "step_id": st.step_id, "agent_id": st.agent_id, "task_id": st.task_id,
                    "stage_id": st.stage_id, "step_intention": st.step_intention,
                });
                if let Some(Value::Object(req)) = st
                    .execute_result
                    .as_ref()
                    .and_then(|r| r.get("waiting_for_approval"))
                {
                    for (k, v) in req {
                        item[k] = v.clone();
                    }
                }
                item
            })
            .collect()
    });
    Ok(Json(json!({ "approvals": list })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    pub args_hash: String,
    #[serde(default)]
    pub arguments: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RejectBody {
    pub reason: String,
}

/// `POST /api/step/{id}/approve`.
pub async fn approve(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<StepId>,
    ApiJson(body): ApiJson<ApproveBody>,
) -> Result<Json<Value>, AppError> {
    let verdict = Verdict::Approve {
        args_hash: body.args_hash,
        arguments: body.arguments,
    };
    give(&state, &caller, id, verdict).await
}

/// `POST /api/step/{id}/reject`.
pub async fn reject(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<StepId>,
    ApiJson(body): ApiJson<RejectBody>,
) -> Result<Json<Value>, AppError> {
    give(
        &state,
        &caller,
        id,
        Verdict::Reject {
            reason: body.reason,
        },
    )
    .await
}

async fn give(
    state: &ApiState,
    caller: &Caller,
    id: StepId,
    verdict: Verdict,
) -> Result<Json<Value>, AppError> {
    // A member may not see most steps; one they see they still may not decide on.
    let agent = state.inner.monitor.read(|s| {
        let view = caller.view(s);
        s.step(&id)
            .filter(|st| view.sees_task(&st.task_id))
            .map(|st| st.agent_id.clone())
    });
    let agent = agent.ok_or_else(|| AppError::NotFound(format!("no step `{id}`")))?;
    caller.must_be_operator("approves or rejects tool calls")?;
    let decide = Decide {
        step_id: id.clone(),
        by: caller.0.clone(),
        verdict,
    };
    let answer = state
        .inner
        .dispatcher
        .send(DecideFor(agent, decide))
        .await
        .map_err(|e| AppError::Unavailable(format!("the team is not running: {e}")))?;
    match answer {
        Ok(()) => Ok(Json(json!({ "success": true, "step_id": id }))),
        Err(ControlRefused::Refused(
            e @ (VerdictError::NotWaiting(_) | VerdictError::StaleHash { .. }),
        )) => Err(AppError::Rejected(StatusCode::CONFLICT, e.to_string())),
        Err(ControlRefused::Refused(e)) => Err(AppError::Rejected(
            StatusCode::UNPROCESSABLE_ENTITY,
            e.to_string(),
        )),
        Err(e @ ControlRefused::NoAgent(_)) => Err(AppError::NotFound(e.to_string())),
        Err(e) => Err(AppError::Unavailable(e.to_string())),
    }
}
