//! An operator's control over the team's work: `POST /api/task/{id}/cancel {reason?}` stops a
//! task (it and its open stages become `cancelled`; its agents drop its work and abandon calls
//! in flight for it; 409 for a task already over or the base task),
//! `POST /api/step/{id}/cancel {reason?}` stops one step (409 if it is over),
//! `POST /api/task/{id}/pause` / `resume` holds a task's steps (409 for a task over),
//! `POST /api/agent/{id}/pause` / `resume` holds an agent's next steps,
//! `POST /api/stage/{id}/cancel {reason?}` stops a stage and `POST /api/stage/{id}/retry` starts
//! a running stage afresh with the same agents (409 for a stage not running). 404 for what the
//! caller cannot see, 403 for a member. A cancel's body may be left out (the reason is optional).

use super::error::ApiPath;
use super::reason::{Fault, Malformed, Missing, OperatorAction, Reason, Refused};
use super::{ApiState, AppError, Caller};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use cohort_core::ids::{AgentId, StageId, StepId, TaskId};
use cohort_core::step::cancel::CancelError;
use cohort_core::team::SyncError;
use cohort_runtime::actors::{
    CancelStage, CancelStep, CancelStepFor, CancelTask, ControlRefused, PauseFor, PauseTask,
    RetryStage,
};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, expecting = "a JSON object {\"reason\": \"…\"}")]
pub struct CancelBody {
    #[serde(default)]
    pub reason: String,
}

/// A cancel's body: `{reason?}` as JSON, or nothing at all (no body, an empty one), since the
/// reason is optional. The content type is not required: `curl -d '{"reason": "…"}'` sends
/// its own, and the body is read as JSON whatever it says.
pub struct OptionalBody(pub CancelBody);

impl<S: Send + Sync> axum::extract::FromRequest<S> for OptionalBody {
    type Rejection = AppError;
    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, AppError> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|r| {
                let detail = r.body_text();
                AppError::Rejected(r.status(), Malformed::Body { detail }.into())
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalBody(CancelBody::default()));
        }
        serde_json::from_slice(&bytes)
            .map(OptionalBody)
            .map_err(|e| {
                let status = match e.classify() {
                    serde_json::error::Category::Data => StatusCode::UNPROCESSABLE_ENTITY,
                    _ => StatusCode::BAD_REQUEST,
                };
                let detail = e.to_string();
                AppError::Rejected(status, Malformed::CancelBody { detail }.into())
            })
    }
}

/// The agent of step `id`, when the caller sees the step and is an operator (404 and 403
/// otherwise: a member may not learn that someone else's step exists).
pub(super) fn operator_step(
    state: &ApiState,
    caller: &Caller,
    id: &StepId,
    what: OperatorAction,
) -> Result<AgentId, AppError> {
    let agent = state.inner.monitor.read(|s| {
        let view = caller.view(s);
        s.step(id)
            .filter(|st| view.sees_step_state(st))
            .map(|st| st.agent_id.clone())
    });
    let agent =
        agent.ok_or_else(|| AppError::NotFound(Missing::Step { step: id.clone() }.into()))?;
    caller.must_be_operator(what)?;
    Ok(agent)
}

/// 404 unless the caller sees task `id`; 403 unless they are an operator.
fn operator_task(
    state: &ApiState,
    caller: &Caller,
    id: &TaskId,
    what: OperatorAction,
) -> Result<(), AppError> {
    let seen = state
        .inner
        .monitor
        .read(|s| caller.view(s).sees_task(id) && s.tasks.contains_key(id));
    if !seen {
        return Err(AppError::NotFound(
            Missing::Task { task: id.clone() }.into(),
        ));
    }
    caller.must_be_operator(what)
}

/// The task of stage `id`, when the caller sees it and is an operator.
fn operator_stage(
    state: &ApiState,
    caller: &Caller,
    id: &StageId,
    what: OperatorAction,
) -> Result<TaskId, AppError> {
    let task = state.inner.monitor.read(|s| {
        let view = caller.view(s);
        s.stages
            .get(id)
            .filter(|st| view.sees_task(&st.task_id))
            .map(|st| st.task_id.clone())
    });
    let stage = || Missing::Stage { stage: id.clone() }.into();
    let task = task.ok_or_else(|| AppError::NotFound(stage()))?;
    caller.must_be_operator(what)?;
    Ok(task)
}

/// SyncState's answer to a person's control as the reply: `ok` when done; 409 for work that is
/// over (or the base task, or a stage not running), 404 for work that is gone, 422 otherwise.
pub(super) fn sync_reply(
    answer: Result<Result<(), SyncError>, actix::MailboxError>,
    ok: Value,
) -> Result<Json<Value>, AppError> {
    match answer? {
        Ok(()) => Ok(Json(ok)),
        Err(
            e @ (SyncError::TaskOver(..) | SyncError::BaseTask | SyncError::StageNotRunning { .. }),
        ) => Err(AppError::Rejected(StatusCode::CONFLICT, e.into())),
        Err(e @ (SyncError::UnknownTask(_) | SyncError::UnknownStage { .. })) => {
            Err(AppError::NotFound(e.into()))
        }
        Err(e) => Err(AppError::Rejected(
            StatusCode::UNPROCESSABLE_ENTITY,
            e.into(),
        )),
    }
}

/// `POST /api/step/{id}/cancel {reason?}`: the step ends `cancelled` (a call in flight for it
/// is abandoned); 409 for a step already over.
pub async fn cancel_step(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<StepId>,
    OptionalBody(body): OptionalBody,
) -> Result<Json<Value>, AppError> {
    let agent = operator_step(&state, &caller, &id, OperatorAction::CancelStep)?;
    let cancel = CancelStep {
        step_id: id.clone(),
        by: caller.0.clone(),
        reason: body.reason,
    };
    let answer = state
        .inner
        .dispatcher
        .send(CancelStepFor(agent, cancel))
        .await?;
    match answer {
        Ok(()) => Ok(Json(json!({ "success": true, "step_id": id }))),
        Err(ControlRefused::NotCancelled(e @ (CancelError::Over(..) | CancelError::Ending(_)))) => {
            Err(AppError::Rejected(
                StatusCode::CONFLICT,
                Refused::Cancel(e).into(),
            ))
        }
        Err(ControlRefused::NotCancelled(e @ CancelError::Unavailable(_))) => {
            Err(AppError::Unavailable(Refused::Cancel(e).into()))
        }
        Err(ControlRefused::NotCancelled(e)) => Err(AppError::NotFound(Refused::Cancel(e).into())),
        Err(e) => Err(unreached(e)),
    }
}

/// A person's control that reached no agent, or that the agent refused, as an answer: 404
/// for an agent the team does not have, 503 for one that did not answer, and the refusal's
/// own status otherwise (a verdict: 409 for one too late or on a stale hash, 422 for one that
/// does not fit).
pub(super) fn unreached(e: ControlRefused) -> AppError {
    use cohort_core::step::approval::VerdictError as V;
    match &e {
        ControlRefused::NoAgent(_) => AppError::NotFound(control_reason(e)),
        ControlRefused::Refused(V::NotWaiting(_) | V::StaleHash) => {
            AppError::Rejected(StatusCode::CONFLICT, control_reason(e))
        }
        ControlRefused::Refused(V::Unavailable(_))
        | ControlRefused::Unreachable(..)
        | ControlRefused::NotCancelled(_) => AppError::Unavailable(control_reason(e)),
        ControlRefused::Refused(_) => {
            AppError::Rejected(StatusCode::UNPROCESSABLE_ENTITY, control_reason(e))
        }
    }
}

/// Why a person's control reached no agent or was refused.
pub(super) fn control_reason(e: ControlRefused) -> Reason {
    match e {
        ControlRefused::NoAgent(agent) => Missing::Agent { agent }.into(),
        ControlRefused::Unreachable(agent, detail) => {
            Fault::AgentUnreachable { agent, detail }.into()
        }
        ControlRefused::Refused(e) => Refused::Verdict(e).into(),
        ControlRefused::NotCancelled(e) => Refused::Cancel(e).into(),
    }
}

/// `POST /api/task/{id}/cancel`.
pub async fn cancel_task(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<TaskId>,
    OptionalBody(body): OptionalBody,
) -> Result<Json<Value>, AppError> {
    operator_task(&state, &caller, &id, OperatorAction::CancelTask)?;
    let cancel = CancelTask {
        task_id: id.clone(),
        by: caller.0.clone(),
        reason: body.reason,
    };
    let answer = state.inner.sync.send(cancel).await;
    sync_reply(answer, json!({ "success": true, "task_id": id }))
}

/// `POST /api/task/{id}/pause`.
pub async fn pause_task(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<TaskId>,
) -> Result<Json<Value>, AppError> {
    set_task_paused(&state, &caller, id, true).await
}

/// `POST /api/task/{id}/resume`.
pub async fn resume_task(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<TaskId>,
) -> Result<Json<Value>, AppError> {
    set_task_paused(&state, &caller, id, false).await
}

async fn set_task_paused(
    state: &ApiState,
    caller: &Caller,
    id: TaskId,
    paused: bool,
) -> Result<Json<Value>, AppError> {
    operator_task(state, caller, &id, OperatorAction::PauseTask)?;
    let pause = PauseTask {
        task_id: id.clone(),
        by: caller.0.clone(),
        paused,
    };
    let answer = state.inner.sync.send(pause).await;
    sync_reply(
        answer,
        json!({ "success": true, "task_id": id, "paused": paused }),
    )
}

/// `POST /api/agent/{id}/pause`.
pub async fn pause_agent(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<AgentId>,
) -> Result<Json<Value>, AppError> {
    set_paused(&state, &caller, id, true).await
}

/// `POST /api/agent/{id}/resume`.
pub async fn resume_agent(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<AgentId>,
) -> Result<Json<Value>, AppError> {
    set_paused(&state, &caller, id, false).await
}

async fn set_paused(
    state: &ApiState,
    caller: &Caller,
    id: AgentId,
    paused: bool,
) -> Result<Json<Value>, AppError> {
    let seen = state
        .inner
        .monitor
        .read(|s| caller.view(s).sees_agent(&id) && s.agents.contains_key(&id));
    if !seen {
        return Err(AppError::NotFound(Missing::Agent { agent: id }.into()));
    }
    caller.must_be_operator(OperatorAction::PauseAgent)?;
    state
        .inner
        .dispatcher
        .send(PauseFor(id.clone(), paused))
        .await?
        // Whatever kept the agent from pausing, the caller is told it was not found.
        .map_err(|e| AppError::NotFound(control_reason(e)))?;
    Ok(Json(
        json!({ "success": true, "agent_id": id, "paused": paused }),
    ))
}

/// `POST /api/stage/{id}/cancel {reason?}`: the stage becomes `cancelled`; a running one's
/// agents drop its work and the next stage starts (or the manager judges the task); 409 for a
/// stage or task over.
pub async fn cancel_stage(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<StageId>,
    OptionalBody(body): OptionalBody,
) -> Result<Json<Value>, AppError> {
    let task = operator_stage(&state, &caller, &id, OperatorAction::CancelStage)?;
    let cancel = CancelStage {
        task_id: task,
        stage_id: id.clone(),
        by: caller.0.clone(),
        reason: body.reason,
    };
    let answer = state.inner.sync.send(cancel).await;
    sync_reply(answer, json!({ "success": true, "stage_id": id }))
}

/// `POST /api/stage/{id}/retry`.
pub async fn retry_stage(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<StageId>,
) -> Result<Json<Value>, AppError> {
    let task = operator_stage(&state, &caller, &id, OperatorAction::RetryStage)?;
    let retry = RetryStage {
        task_id: task,
        stage_id: id.clone(),
        by: caller.0.clone(),
    };
    let answer = state.inner.sync.send(retry).await;
    sync_reply(answer, json!({ "success": true, "stage_id": id }))
}
