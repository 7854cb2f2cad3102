//! `GET /api/nodes`: the nodes of a team across machines, which of them runs the team, which
//! node runs each agent (the store's leases), and which nodes went away, for the console and
//! for scripts. A team served by one process has no nodes: both lists are empty. Operators only.

use super::reason::{Fault, OperatorAction};
use super::{ApiState, AppError, Caller};
use axum::Json;
use axum::extract::State;
use cohort_store::lease::TEAM_LEASE;
use serde_json::{Map, Value, json};

pub async fn nodes(State(state): State<ApiState>, caller: Caller) -> Result<Json<Value>, AppError> {
    caller.must_be_operator(OperatorAction::SeeNodes)?;
    let Some((store, live_ms)) = state.inner.nodes.get() else {
        return Ok(Json(json!({"nodes": [], "agents": {}})));
    };
    let (nodes, leases) = store.placement().await.map_err(|e| {
        let detail = e.to_string();
        AppError::Unavailable(Fault::StoreUnavailable { detail }.into())
    })?;
    let running = leases
        .iter()
        .find(|l| l.resource == TEAM_LEASE && l.expires_in_ms > 0)
        .map(|l| l.node.as_str());
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|n| {
            let state = match n.stopped_at {
                Some(_) => "stopped",
                None if (n.seen_ms_ago as u128) < *live_ms => "up",
                None => "gone",
            };
            json!({
                "name": n.name, "address": n.address, "state": state,
                "seen_ms_ago": n.seen_ms_ago, "runs_team": running == Some(n.name.as_str()),
            })
        })
        .collect();
    let agents: Map<String, Value> = leases
        .iter()
        .filter_map(|l| Some((l.resource.strip_prefix("agent/")?.to_owned(), json!(l.node))))
        .collect();
    Ok(Json(json!({"nodes": nodes, "agents": agents})))
}
