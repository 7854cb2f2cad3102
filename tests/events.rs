//! The change stream end to end, on the benchmark team (a manager and N scripted workers):
//! `cohort run` reports the exact number of steps and the task's own end; what the monitor
//! rebuilt from the changes is, agent for agent, what each actor holds; a websocket-style reader
//! that starts from a snapshot and applies the later changes ends with the monitor's states.

use cohort::actors::{GetAgentState, Host, start_team};
use cohort::bench::team::{MANAGER_CALLS, Scratch, TeamShape, worker_calls, write_team};
use cohort::config::load_team;
use cohort::event::States;
use cohort::run::{RunOptions, RunOutcome, run_goal};
use cohort::state::ExecutionState;
use std::time::Duration;

fn bench_team(name: &str, workers: usize) -> (Scratch, cohort::config::TeamConfig) {
    let scratch = Scratch::new(name).unwrap();
    let shape = TeamShape {
        workers,
        steps: 3,
        delay_ms: 0,
        max_in_flight: 8,
        goals: 1,
    };
    let file = write_team(&scratch.0, shape, None).unwrap();
    let cfg = load_team(&file).unwrap();
    (scratch, cfg)
}

#[actix::test]
async fn cohort_run_counts_every_step_exactly_and_ends_on_the_tasks_own_end() {
    let workers = 40;
    let (_dir, cfg) = bench_team("events-run", workers);
    let vars = |_: &str| None;
    let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
    let mut shown = 0u64;
    let report = run_goal(&cfg, "think", &RunOptions::default(), &host, |_| shown += 1)
        .await
        .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);
    let want = MANAGER_CALLS + workers as u64 * worker_calls(3);
    assert_eq!(report.steps_run as u64, want, "every step that ran, once");
    assert_eq!(shown, want, "a progress line for each");
    assert_eq!(report.tasks.len(), 1);
    assert_eq!(report.tasks[0].execution_state, ExecutionState::Finished);
}

#[actix::test]
async fn the_monitor_rebuilds_each_agent_exactly_and_a_reader_of_the_changes_gets_the_same_tasks() {
    let workers = 12;
    let (_dir, cfg) = bench_team("events-agents", workers);
    let vars = |_: &str| None;
    let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
    let team = start_team(&cfg, &host).unwrap();
    let mut events = team.monitor.subscribe();
    team.submit_goal(None, "think").await.unwrap();
    let mut done = false;
    for _ in 0..1_000 {
        done = team.monitor.read(|s| {
            s.tasks
                .values()
                .any(|t| t.task_id != team.base_task && t.execution_state.is_over())
                && s.counters().steps_running == 0
                && s.counters().agents_working == 0
        });
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(done, "the task ended");
    tokio::time::sleep(Duration::from_millis(50)).await;

    // Every agent as the monitor rebuilt it from changes is the agent as its actor holds it.
    for (id, addr) in &team.agents {
        let own = serde_json::to_value(addr.send(GetAgentState).await.unwrap()).unwrap();
        let rebuilt = team
            .monitor
            .read(|s| serde_json::to_value(&s.agents[id]).unwrap());
        assert_eq!(own, rebuilt, "agent {id}");
    }

    // A reader of the stream (as `cohort run` or a websocket client) ends with the tasks and
    // stages the monitor holds.
    let mut reader = States::default();
    let mut last = 0;
    while let Ok(ev) = events.try_recv() {
        assert!(ev.event.version > last, "versions grow");
        last = ev.event.version;
        reader.apply(&ev.event.change);
    }
    let all = team.monitor.all();
    let task = reader
        .tasks
        .values()
        .find(|t| t.task_id != team.base_task)
        .expect("the reader saw the task created");
    assert_eq!(
        all["task"][task.task_id.as_str()],
        serde_json::to_value(task).unwrap()
    );
    assert_eq!(task.stage_list.len(), 1);
    for (id, stage) in &reader.stages {
        assert_eq!(
            all["stage"][id.as_str()],
            serde_json::to_value(stage).unwrap()
        );
        assert_eq!(stage.completion_summary.len(), workers);
    }
    team.shutdown().await;
}
