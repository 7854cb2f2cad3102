//! The change stream end to end, on the benchmark team (a manager and N scripted workers):
//! `cohort run` reports the exact number of steps and the task's own end; what the monitor
//! rebuilt from the changes is, agent for agent, what each actor holds; a websocket-style reader
//! that starts from a snapshot and applies the later changes ends with the monitor's states.

use cohort::actors::{GetAgentState, Host, start_team};
use cohort::bench::team::{MANAGER_CALLS, Scratch, TeamShape, worker_calls, write_team};
use cohort::config::load_team;
use cohort::event::{StateKind, States};
use cohort::run::{Progress, RunOptions, RunOutcome, run_goal};
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

/// Waits (up to 10 s) until the goal's task is over and nothing runs, then a moment more.
async fn until_the_task_ends(team: &cohort::actors::Team) {
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
}

#[actix::test]
async fn cohort_run_counts_every_step_exactly_and_ends_on_the_tasks_own_end() {
    let workers = 40;
    let (_dir, cfg) = bench_team("events-run", workers);
    let vars = |_: &str| None;
    let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
    let mut shown = 0u64;
    let report = run_goal(&cfg, "think", &RunOptions::default(), &host, |p| {
        if let Progress::Step { .. } = p {
            shown += 1
        }
    })
    .await
    .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);
    let want = MANAGER_CALLS + workers as u64 * worker_calls(3);
    assert_eq!(report.steps_run as u64, want, "every step that ran, once");
    assert_eq!(shown, want, "a progress line for each");
    assert_eq!(report.tasks.len(), 1);
    assert_eq!(report.tasks[0].execution_state, ExecutionState::Finished);
    // Every step that ran says when it started and ended, as clients read it.
    let steps = report.states["step"].as_object().unwrap();
    let timed = steps
        .values()
        .filter(|s| s["execution_state"] == "finished")
        .inspect(|s| {
            let (start, end) = (s["started_at"].as_i64(), s["ended_at"].as_i64());
            assert!(start.is_some() && end >= start, "{s}");
        })
        .count();
    assert!(timed > 0);
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
    until_the_task_ends(&team).await;

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
        reader.apply_at(&ev.event.change, ev.event.at);
    }
    let all = team.monitor.all();
    let task = reader
        .tasks
        .values()
        .find(|t| t.task_id != team.base_task)
        .expect("the reader saw the task created");
    assert_eq!(
        all["task"][task.task_id.as_str()],
        reader.json(StateKind::Task, task.task_id.as_str()).unwrap()
    );
    assert_eq!(task.stage_list.len(), 1);
    for (id, stage) in &reader.stages {
        assert_eq!(
            all["stage"][id.as_str()],
            reader.json(StateKind::Stage, id.as_str()).unwrap()
        );
        assert_eq!(stage.completion_summary.len(), workers);
    }
    team.shutdown().await;
}

/// What the store will rely on: the states at one version, kept as a full record and read
/// back, plus every later event read back from the JSON it was published as, give the
/// monitor's states exactly (every kind, and the counters).
#[actix::test]
async fn a_record_of_the_states_and_the_events_after_it_read_back_give_the_same_states() {
    use cohort::event::{Event, StatesRecord};
    let workers = 6;
    let (_dir, cfg) = bench_team("events-record", workers);
    let vars = |_: &str| None;
    let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
    let team = start_team(&cfg, &host).unwrap();
    let mut events = team.monitor.subscribe();
    // The team is idle until it is given a goal: nothing moves between these two reads.
    let v0 = team.monitor.version();
    let record0 = team
        .monitor
        .read(|s| serde_json::to_string(&StatesRecord::of(s)).unwrap());
    assert_eq!(team.monitor.version(), v0);
    team.submit_goal(None, "think").await.unwrap();
    until_the_task_ends(&team).await;

    let mut reader = serde_json::from_str::<StatesRecord>(&record0)
        .unwrap()
        .into_states();
    let mut applied = 0;
    while let Ok(p) = events.try_recv() {
        if p.event.version <= v0 {
            continue;
        }
        let back: Event = serde_json::from_slice(p.json()).unwrap();
        assert_eq!(back, p.event, "an event reads back as it was published");
        reader.apply_at(&back.change, back.at);
        applied += 1;
    }
    assert!(applied > 50, "the run made changes ({applied})");
    let (all, counters) = team.monitor.read(|s| (s.all_json(), s.counters()));
    assert_eq!(reader.all_json(), all);
    assert_eq!(reader.counters(), counters);

    // And the final states, recorded and read back, are the states.
    let json = team
        .monitor
        .read(|s| serde_json::to_string(&StatesRecord::of(s)).unwrap());
    let back = serde_json::from_str::<StatesRecord>(&json)
        .unwrap()
        .into_states();
    assert_eq!(back.all_json(), all);
    assert_eq!(back.counters(), counters);
    assert_eq!(
        back.tasks_in_order()
            .iter()
            .map(|t| &t.task_id)
            .collect::<Vec<_>>(),
        team.monitor
            .read(|s| s
                .tasks_in_order()
                .iter()
                .map(|t| t.task_id.clone())
                .collect::<Vec<_>>())
            .iter()
            .collect::<Vec<_>>()
    );
    team.shutdown().await;
}
