//! When steps fail, nobody is left waiting and nothing hangs: a waiting sender whose reply
//! failed gets its wait id back, a stuck agent is reported to the manager, the task ends.

use crate::support::states;

use cohort::actors::Host;
use cohort::config::load_team;
use cohort::run::{RunOptions, RunOutcome, run_goal};
use states::*;
use std::path::Path;

#[actix::test]
async fn a_failed_reply_frees_the_waiter_and_a_stuck_agent_reaches_the_manager() {
    let cfg = load_team(Path::new("tests/fixtures/failures/team.yaml")).unwrap();
    let report = run_goal(
        &cfg,
        "Write and review a line",
        &RunOptions::default(),
        &host(&|_| None),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(
        report.outcome,
        RunOutcome::Failed,
        "the manager closed the task as failed"
    );
    let s = &report.states;
    let task = the_task(s);
    assert_eq!(task["task_summary"], "The review never happened.");
    assert_quiet(s);

    // The reviewer's two malformed answers failed their steps, with reasons.
    let failed: Vec<_> = steps(s)
        .into_iter()
        .filter(|st| st["agent_id"] == "reviewer" && st["execution_state"] == "failed")
        .collect();
    assert_eq!(failed.len(), 2, "{failed:#?}");
    assert!(failed.iter().all(|st| {
        st["execute_result"]["error"]
            .as_str()
            .unwrap()
            .contains("step failed")
    }));

    // The writer's wait came back anyway, with the reason, and the writer went on to summarise.
    let pool = task["shared_conversation_pool"].as_array().unwrap();
    let ask = pool
        .iter()
        .find(|e| e["message"]["sender_id"] == "writer")
        .unwrap();
    let wait = &ask["message"]["waiting"][0];
    let back = pool
        .iter()
        .find(|e| &e["message"]["return_waiting_id"] == wait)
        .expect("the wait id came back");
    assert!(
        back["message"]["message"]
            .as_str()
            .unwrap()
            .contains("could not answer")
    );
    let stage = &stages_of(s, task)[0];
    assert_eq!(
        stage["completion_summary"]["writer"],
        "Wrote the line; the review failed."
    );

    // The manager was told the reviewer is stuck, once, and finished the stage on it.
    let stuck: Vec<_> = pool
        .iter()
        .filter(|e| {
            e["message"]["sender_id"] == "[TaskState]"
                && e["message"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("cannot go on")
        })
        .collect();
    assert_eq!(stuck.len(), 1);
    assert!(
        stuck[0]["message"]["message"]
            .as_str()
            .unwrap()
            .contains("`reviewer`")
    );
    assert_eq!(stage["every_agent_state"]["reviewer"], "failed");
    assert_eq!(stage["execution_state"], "finished");
}

/// The host a test runs the team in: the given variables and the built `cohort` binary.
fn host(vars: &dyn Fn(&str) -> Option<String>) -> Host<'_> {
    Host::new(vars, env!("CARGO_BIN_EXE_cohort"))
}
