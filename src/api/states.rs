//! The states API, read from the monitor's states (never from the actors):
//! `GET /api/states?type=task|stage|agent|step` → `{id: state}` a page at a time, and
//! `GET /api/state/{id}` → `{"kind", "state"}` for whichever kind has that id, and
//! `GET /api/step/{id}/calls` → the step's LLM calls as sent and answered.

use super::access::View;
use super::error::{ApiPath, ApiQuery};
use super::{ApiState, AppError, Caller};
use crate::ids::TaskId;
use crate::monitor::StateKind;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};

#[derive(Deserialize)]
pub struct StatesQuery {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// At most this many states (default and maximum: [`PAGE_MAX`]).
    pub limit: Option<usize>,
    /// Only states whose id sorts after this one (the `x-cohort-next-after` of the page before).
    pub after: Option<String>,
    /// Only the states of this task (its stages, steps, group's agents; or the task itself).
    pub task: Option<TaskId>,
}

/// The most states one `/api/states` answer holds.
pub const PAGE_MAX: usize = 1_000;

/// The kind a `type=` names.
pub fn parse_kind(name: &str) -> Option<StateKind> {
    StateKind::parse(name)
}

/// `GET /api/states?type=…[&limit=N][&after=ID][&task=ID]` → `{id: state}`, ids in order, one
/// page at a time. When more remain, the `x-cohort-next-after` header names the id to ask
/// `after`; `x-cohort-total` counts every match.
pub async fn states(
    State(state): State<ApiState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<StatesQuery>,
) -> Result<Response, AppError> {
    let kinds = || {
        StateKind::ALL
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join("|")
    };
    let name = q
        .kind
        .ok_or_else(|| AppError::BadRequest(format!("missing `type` ({})", kinds())))?;
    let kind = parse_kind(&name).ok_or_else(|| {
        AppError::BadRequest(format!("unknown type `{name}`; expected {}", kinds()))
    })?;
    let limit = match q.limit {
        Some(0) => return Err(AppError::BadRequest("`limit` must be at least 1".into())),
        Some(n) if n > PAGE_MAX => {
            return Err(AppError::BadRequest(format!(
                "`limit` is at most {PAGE_MAX}; page with `after`"
            )));
        }
        Some(n) => n,
        None => PAGE_MAX,
    };
    let (page, total, next) = state.inner.monitor.read(|s| {
        let view = caller.view(s);
        let mut ids = s.ids(kind, q.task.as_ref());
        if view != View::All {
            // Nothing of a task they cannot see, not even which of their agents are in it.
            if q.task.as_ref().is_some_and(|t| !view.sees_task(t)) {
                ids.clear();
            }
            ids.retain(|id| view.sees(s, kind, id));
        }
        let start = match &q.after {
            Some(a) => ids.partition_point(|id| id <= a),
            None => 0,
        };
        let end = (start + limit).min(ids.len());
        let page: Map<String, Value> = ids[start..end]
            .iter()
            .filter_map(|id| view.json(s, kind, id).map(|v| (id.clone(), v)))
            .collect();
        let next = (end < ids.len()).then(|| ids[end - 1].clone());
        (page, ids.len(), next)
    });
    let mut res = Json(Value::Object(page)).into_response();
    let headers = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&total.to_string()) {
        headers.insert("x-cohort-total", v);
    }
    if let Some(Ok(v)) = next.map(|n| HeaderValue::from_str(&n)) {
        headers.insert("x-cohort-next-after", v);
    }
    Ok(res)
}

/// `GET /api/state/{id}`: `{kind, state}` from memory; a finished task that left memory
/// (retention) comes from the store, as `{kind: "task", state, stages, archived: true}`.
pub async fn state(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, AppError> {
    // What a member may not see answers as if it did not exist: 404, never 403, so ids of
    // other people's work cannot be probed.
    let not_found = || AppError::NotFound(format!("no task, stage, agent or step `{id}`"));
    let (live, view) = state.inner.monitor.read(|s| {
        let view = caller.view(s);
        let live = StateKind::ALL.into_iter().find_map(|k| {
            let exists = s.json(k, &id).is_some();
            exists.then(|| {
                let shown = view.json(s, k, &id);
                shown.map(|st| json!({ "kind": k.name(), "state": st }))
            })
        });
        (live, view)
    });
    match live {
        Some(Some(v)) => return Ok(Json(v)),
        Some(None) => return Err(not_found()),
        None => {}
    }
    let Some(store) = &state.inner.store else {
        return Err(not_found());
    };
    match crate::store::stored_task(store.as_ref(), &TaskId::from(id.as_str())).await {
        // A member reads back only a task whose group held them.
        Ok(Some((task, _))) if view != View::All && !task.task_group.contains(&caller.0) => {
            Err(not_found())
        }
        Ok(Some((task, stages))) => Ok(Json(
            json!({ "kind": "task", "state": task, "stages": stages, "archived": true }),
        )),
        Ok(None) => Err(not_found()),
        Err(e) => Err(AppError::Internal(format!("reading the store failed: {e}"))),
    }
}

/// `GET /api/step/{id}/calls` → `{step_id, calls: [{system, prompt, reply | error, usage, …}],
/// kept}`: the step's LLM calls as sent and answered (a re-asked answer makes several), while
/// they are among the team's newest `kept` calls. Operators only: a prompt carries the agent's
/// long-term memory and history from other work, which a member's view leaves out; to anyone
/// else the step is a 404.
pub async fn step_calls(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, AppError> {
    let step = crate::ids::StepId::from(id.as_str());
    let seen = state
        .inner
        .monitor
        .read(|s| s.step(&step).is_some() && caller.view(s) == View::All);
    if !seen {
        return Err(AppError::NotFound(format!("no step `{id}`")));
    }
    let calls = state.inner.calls.of_step(&step);
    Ok(Json(json!({
        "step_id": id,
        "calls": calls,
        "kept": crate::llm::recorded::KEPT,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_are_the_four_kinds() {
        assert_eq!(parse_kind("step"), Some(StateKind::Step));
        assert_eq!(parse_kind("task"), Some(StateKind::Task));
        assert_eq!(parse_kind("Task"), None);
        assert_eq!(parse_kind(""), None);
    }
}
