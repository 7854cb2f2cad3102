//! The states API, read from the monitor's latest-state index (never from the actors):
//! `GET /api/states?type=task|stage|agent|step` → `{id: state}`, and `GET /api/state/{id}` →
//! `{"kind", "state"}` for whichever kind has that id.

use super::error::{ApiPath, ApiQuery};
use super::{ApiState, AppError};
use crate::monitor::StateKind;
use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

#[derive(Deserialize)]
pub struct StatesQuery {
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

/// The kind a `type=` names.
pub fn parse_kind(name: &str) -> Option<StateKind> {
    StateKind::ALL.into_iter().find(|k| k.name() == name)
}

pub async fn states(
    State(state): State<ApiState>,
    ApiQuery(q): ApiQuery<StatesQuery>,
) -> Result<Json<BTreeMap<String, Value>>, AppError> {
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
    Ok(Json(state.inner.monitor.snapshot(kind)))
}

pub async fn state(
    State(state): State<ApiState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, AppError> {
    StateKind::ALL
        .into_iter()
        .find_map(|k| {
            state
                .inner
                .monitor
                .get(k, &id)
                .map(|s| json!({ "kind": k.name(), "state": s }))
        })
        .map(Json)
        .ok_or_else(|| AppError::NotFound(format!("no task, stage, agent or step `{id}`")))
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
