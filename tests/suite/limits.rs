//! step_limits in a running team: a worker past `per_stage` has its further steps stopped
//! without calling its model, the manager is told it cannot go on, and the task ends.

use crate::support::states;

use cohort::actors::Host;
use cohort::config::load_team;
use cohort::run::{RunOptions, RunOutcome, run_goal};
use states::{assert_quiet, steps, the_task};
use std::path::Path;

#[actix::test]
async fn a_worker_past_its_step_cap_is_stopped_and_the_manager_decides() {
    let cfg = load_team(Path::new("tests/fixtures/limits/team.yaml")).unwrap();
    let vars = |_: &str| None;
    let report = run_goal(
        &cfg,
        "Take notes",
        &RunOptions::default(),
        &Host::new(&vars, env!("CARGO_BIN_EXE_cohort")),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(
        report.outcome,
        RunOutcome::Failed,
        "the manager closed the task"
    );
    let s = &report.states;
    assert_eq!(the_task(s)["task_summary"], "Stopped by the step limit.");
    assert_quiet(s);

    let writer: Vec<_> = steps(s)
        .into_iter()
        .filter(|st| st["agent_id"] == "writer")
        .collect();
    let stopped: Vec<_> = writer
        .iter()
        .filter(|st| {
            st["execute_result"]["error"].as_str().is_some_and(|e| {
                e.starts_with("stopped: ") && e.contains("steps already ran in this stage")
            })
        })
        .collect();
    // planning and two thinks ran; notes 3 and 4 were stopped, and no decision of its own
    // was added (it would hit the same limit).
    assert_eq!(stopped.len(), 2, "{writer:#?}");
    let ran_think = writer
        .iter()
        .filter(|st| st["executor"] == "think" && st["execution_state"] == "finished")
        .count();
    assert_eq!(ran_think, 2);
    assert!(!writer.iter().any(|st| st["executor"] == "decision"));
}
