//! An operator's control over the team's work: `POST /api/task/{id}/cancel {reason?}` stops a
//! task (it and its open stages become `cancelled`; its agents drop its work and abandon calls
//! in flight for it; 409 for a task already over or the base task), and
//! `POST /api/agent/{id}/pause` / `resume` holds an agent's next steps. 404 for what the caller
//! cannot see, 403 for a member.

use super::error::{ApiJson, ApiPath};
use super::{ApiState, AppError, Caller};
use crate::actors::{CancelTask, PauseFor};
use crate::config::Access;
use crate::ids::{AgentId, TaskId};
use crate::sync::SyncError;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {
    #[serde(default)]
    pub reason: String,
}

/// `POST /api/task/{id}/cancel`.
pub async fn cancel_task(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<TaskId>,
    ApiJson(body): ApiJson<CancelBody>,
) -> Result<Json<Value>, AppError> {
    let seen = state
        .inner
        .monitor
        .read(|s| caller.view(s).sees_task(&id) && s.tasks.contains_key(&id));
    if !seen {
        return Err(AppError::NotFound(format!("no task `{id}`")));
    }
    if caller.1 != Access::Operator {
        return Err(AppError::Forbidden(
            "only an operator cancels a task".into(),
        ));
    }
    let cancel = CancelTask {
        task_id: id.clone(),
        by: caller.0.clone(),
        reason: body.reason,
    };
    let answer = state
        .inner
        .sync
        .send(cancel)
        .await
        .map_err(|e| AppError::Unavailable(format!("the team is not running: {e}")))?;
    match answer {
        Ok(()) => Ok(Json(json!({ "success": true, "task_id": id }))),
        Err(e @ (SyncError::TaskOver(..) | SyncError::BaseTask)) => {
            Err(AppError::Rejected(StatusCode::CONFLICT, e.to_string()))
        }
        Err(e @ SyncError::UnknownTask(_)) => Err(AppError::NotFound(e.to_string())),
        Err(e) => Err(AppError::Rejected(
            StatusCode::UNPROCESSABLE_ENTITY,
            e.to_string(),
        )),
    }
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
        return Err(AppError::NotFound(format!("no agent `{id}`")));
    }
    if caller.1 != Access::Operator {
        return Err(AppError::Forbidden(
            "only an operator pauses or resumes an agent".into(),
        ));
    }
    state
        .inner
        .dispatcher
        .send(PauseFor(id.clone(), paused))
        .await
        .map_err(|e| AppError::Unavailable(format!("the team is not running: {e}")))?
        .map_err(|e| AppError::NotFound(e.to_string()))?;
    Ok(Json(
        json!({ "success": true, "agent_id": id, "paused": paused }),
    ))
}
