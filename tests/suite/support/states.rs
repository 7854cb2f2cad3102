//! Checks over the final-states JSON (`{"task", "stage", "agent", "step"}`) shared by the
//! scenario tests: the shape `cohort run --json` prints and `/api/states` serves.

use serde_json::Value;

pub fn tasks(s: &Value) -> Vec<&Value> {
    s["task"].as_object().unwrap().values().collect()
}

pub fn steps(s: &Value) -> Vec<&Value> {
    s["step"].as_object().unwrap().values().collect()
}

/// The one task that is not the base task.
pub fn the_task(s: &Value) -> &Value {
    let real: Vec<_> = tasks(s)
        .into_iter()
        .filter(|t| t["task_name"] != "MAS base task")
        .collect();
    assert_eq!(
        real.len(),
        1,
        "expected exactly one task besides the base task"
    );
    real[0]
}

pub fn stages_of<'a>(s: &'a Value, task: &Value) -> Vec<&'a Value> {
    task["stage_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| &s["stage"][id.as_str().unwrap()])
        .collect()
}

pub fn executors_run(s: &Value) -> Vec<String> {
    steps(s)
        .iter()
        .filter(|st| st["execution_state"] == "finished")
        .map(|st| st["executor"].as_str().unwrap().to_owned())
        .collect()
}

/// No step is left to run and no agent holds a wait id.
pub fn assert_quiet(s: &Value) {
    for (id, a) in s["agent"].as_object().unwrap() {
        assert_eq!(
            a["agent_step"]["todo"].as_array().unwrap().len(),
            0,
            "agent {id} still has steps to do"
        );
        assert_eq!(
            a["step_lock"].as_array().unwrap().len(),
            0,
            "agent {id} still holds a step lock"
        );
    }
    for st in steps(s) {
        let state = st["execution_state"].as_str().unwrap();
        assert!(
            state == "finished" || state == "failed",
            "step left {state}: {st}"
        );
    }
}

/// Every stage finished, each with exactly one completion summary per allocated agent.
pub fn assert_stages_finished(s: &Value, task: &Value) {
    for stage in stages_of(s, task) {
        assert_eq!(stage["execution_state"], "finished", "{stage}");
        let alloc: Vec<_> = stage["agent_allocation"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        let done: Vec<_> = stage["completion_summary"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(alloc, done, "one completion summary per allocated agent");
        for a in alloc {
            assert_eq!(stage["every_agent_state"][a], "finished");
        }
    }
}

/// The waiting message from `from` to `to` and the reply that returns its wait id, both in the
/// task's conversation pool.
pub fn assert_wait_round_trip(task: &Value, from: &str, to: &str) {
    let pool: Vec<&Value> = task["shared_conversation_pool"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["message"])
        .collect();
    let ask = pool
        .iter()
        .find(|m| m["sender_id"] == from && m["receiver"][0] == to && !m["waiting"].is_null())
        .unwrap_or_else(|| panic!("no waiting message from {from} to {to} in the pool"));
    let wait = &ask["waiting"][0];
    assert!(
        pool.iter().any(|m| m["sender_id"] == to
            && m["receiver"][0] == from
            && &m["return_waiting_id"] == wait),
        "no reply carrying wait id {wait} in the pool"
    );
}
