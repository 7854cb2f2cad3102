//! A team that keeps its state in a store carries on after a restart: started on the same
//! SQLite file, it has every task, stage, agent and step it had, and takes the next goal.

use cohort::actors::{Host, Team, start_team_stored};
use cohort::bench::team::{Scratch, TeamShape, write_team};
use cohort::config::load_team;
use cohort::store::{SqlStore, load};
use std::sync::Arc;
use std::time::Duration;

async fn open(cfg: &cohort::config::TeamConfig, file: &std::path::Path) -> Team {
    let store = Arc::new(SqlStore::open_sqlite(file).await.unwrap());
    let loaded = load(store.as_ref()).await.unwrap();
    let vars = |_: &str| None;
    let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
    start_team_stored(cfg, &host, store, loaded).unwrap()
}

/// Waits until `n` tasks besides the base task are over and nothing runs.
async fn until_done(team: &Team, n: usize) {
    for _ in 0..2_000 {
        let done = team.monitor.read(|s| {
            s.tasks
                .values()
                .filter(|t| t.task_id != team.base_task && t.execution_state.is_over())
                .count()
                >= n
                && s.counters().steps_running == 0
                && s.counters().agents_working == 0
        });
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{n} tasks did not end");
}

#[actix::test]
async fn a_stored_team_restarts_with_everything_it_had_and_takes_the_next_goal() {
    let scratch = Scratch::new("resume").unwrap();
    let shape = TeamShape {
        workers: 3,
        steps: 2,
        delay_ms: 0,
        max_in_flight: 8,
        goals: 2,
    };
    let cfg = load_team(&write_team(&scratch.0, shape, None).unwrap()).unwrap();
    let file = scratch.0.join("data/team.db");

    let team = open(&cfg, &file).await;
    team.submit_goal(None, "think").await.unwrap();
    until_done(&team, 1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = team.monitor.all();
    let base = team.base_task.clone();
    let run_before = team.monitor.read(|s| s.counters().steps_run);
    team.shutdown().await;
    team.monitor.close();
    drop(team);

    let team = open(&cfg, &file).await;
    assert_eq!(team.base_task, base, "the same base task");
    assert_eq!(
        team.monitor.all(),
        before,
        "every task, stage, agent and step as it was"
    );
    assert_eq!(team.monitor.read(|s| s.counters().steps_run), run_before);
    team.submit_goal(None, "think again").await.unwrap();
    until_done(&team, 2).await;
    let tasks = team.monitor.read(|s| s.tasks.len());
    assert_eq!(tasks, 3, "the base task, the first goal's and the second's");
    assert!(team.monitor.read(|s| s.counters().steps_run) > run_before);
    team.shutdown().await;
    team.monitor.close();
}
