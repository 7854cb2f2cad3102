//! Tool calls and plans waiting for a person: `GET /api/approvals` lists those the caller may
//! see (`kind`: `tool_call` or `plan`); an operator approves one
//! (`POST /api/step/{id}/approve`: a tool call with `{args_hash, arguments?}`, the hash of the
//! arguments they saw and edited arguments if any; a plan with `{plan_hash, steps?}`, the
//! plan's hash and an edited list of steps if any), fills in the arguments a call waits for
//! (`POST /api/step/{id}/params {values}`, `kind` `params`), answers what a server asks during
//! a call (the same route, `kind` `elicitation`; a rejection declines it) or rejects it
//! (`POST /api/step/{id}/reject {reason}`: the call fails, the plan is planned again). The
//! agent takes the verdict (see `agent::approval`, `agent::plan_check`): a stale hash or a
//! step no longer waiting is 409, an edit that cannot run 422.

use super::error::{ApiJson, ApiPath};
use super::{ApiState, AppError, Caller};
use crate::actors::{ControlRefused, Decide, DecideFor};
use crate::agent::approval::{DUE, Verdict, VerdictError};
use crate::agent::params;
use crate::agent::plan_check::{self, EditedStep};
use crate::ids::StepId;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
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
                    (crate::agent::elicitation::KEY, "elicitation"),
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
    pub agent_allocation: std::collections::BTreeMap<crate::ids::AgentId, String>,
}

impl From<EditedStage> for crate::message::StagePlan {
    fn from(e: EditedStage) -> Self {
        crate::message::StagePlan {
            stage_intention: e.stage_intention,
            agent_allocation: e.agent_allocation,
        }
    }
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
            return Err(AppError::BadRequest(
                "approve a tool call with {args_hash, arguments?}, a plan with \
                 {plan_hash, steps?} or a manager's stages with {plan_hash, stages?}"
                    .into(),
            ));
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
        return Err(AppError::BadRequest(
            "values must be a JSON object of the fields asked for".into(),
        ));
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
    let agent = super::control::operator_step(state, caller, &id, "decides on waiting steps")?;
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
            e @ (VerdictError::NotWaiting(_) | VerdictError::StaleHash),
        )) => Err(AppError::Rejected(StatusCode::CONFLICT, e.to_string())),
        Err(ControlRefused::Refused(e @ VerdictError::Unavailable(_))) => {
            Err(AppError::Unavailable(e.to_string()))
        }
        Err(ControlRefused::Refused(e)) => Err(AppError::Rejected(
            StatusCode::UNPROCESSABLE_ENTITY,
            e.to_string(),
        )),
        Err(e @ ControlRefused::NoAgent(_)) => Err(AppError::NotFound(e.to_string())),
        Err(e) => Err(AppError::Unavailable(e.to_string())),
    }
}
