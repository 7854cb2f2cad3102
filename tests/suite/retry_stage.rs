//! retry_stage end to end: the manager judges a stage failed, retries it with a corrected
//! allocation that brings a new agent into the task, and the task then finishes.

use crate::support::states;

use cohort::actors::Host;
use cohort::config::load_team;
use cohort::run::{RunOptions, RunOutcome, run_goal};
use states::*;
use std::path::Path;

#[actix::test]
async fn a_retried_stage_runs_again_with_the_corrected_allocation() {
    let cfg = load_team(Path::new("tests/fixtures/retry/team.yaml")).unwrap();
    let report = run_goal(
        &cfg,
        "List three primes",
        &RunOptions::default(),
        &host(&|_| None),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);
    let s = &report.states;
    let task = the_task(s);
    let stages = stages_of(s, task);
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[0]["execution_state"], "failed");
    assert_eq!(stages[0]["completion_summary"]["writer"], "2, 3, 4");
    assert_eq!(stages[1]["execution_state"], "finished");
    assert_eq!(stages[1]["stage_intention"], stages[0]["stage_intention"]);
    assert_eq!(stages[1]["completion_summary"]["writer"], "2, 3, 5");
    assert_eq!(
        stages[1]["completion_summary"]["checker"],
        "all three are prime"
    );
    let group: Vec<_> = task["task_group"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(group, ["manager", "writer", "checker"]);
    assert_eq!(task["task_summary"], "2, 3, 5 (checked)");
    assert_quiet(s);
}

/// The host a test runs the team in: the given variables and the built `cohort` binary.
fn host(vars: &dyn Fn(&str) -> Option<String>) -> Host<'_> {
    Host::new(vars, env!("CARGO_BIN_EXE_cohort"))
}
