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

/// Waits until `n` tasks besides the base task are over, nothing runs and every message was
/// taken.
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
                && s.deliveries.in_flight_count() == 0
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
    let version = team.monitor.version();
    team.shutdown().await;
    team.monitor.close();
    drop(team);

    // A second restart: the same base task, still first, and nothing announced twice.
    let team = open(&cfg, &file).await;
    assert_eq!(team.base_task, base);
    assert_eq!(
        team.monitor.read(|s| s.tasks_in_order()[0].task_id.clone()),
        base
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        team.monitor.version(),
        version,
        "a restart itself changes nothing"
    );
    team.shutdown().await;
    team.monitor.close();
}

/// A finished task that left memory (retention) is read back from the store whole: its
/// final state and its stages, as they were before it left.
#[actix::test]
async fn a_task_that_left_memory_is_read_back_from_the_store() {
    use cohort::event::StateKind;
    let scratch = Scratch::new("archived").unwrap();
    let shape = TeamShape {
        workers: 2,
        steps: 1,
        delay_ms: 0,
        max_in_flight: 8,
        goals: 2,
    };
    let file = write_team(&scratch.0, shape, None).unwrap();
    let yaml = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{yaml}\nretention: {{finished_tasks: 1}}\n")).unwrap();
    let cfg = load_team(&file).unwrap();
    let store = Arc::new(
        SqlStore::open_sqlite(&scratch.0.join("team.db"))
            .await
            .unwrap(),
    );
    let loaded = load(store.as_ref()).await.unwrap();
    let vars = |_: &str| None;
    let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
    let team = start_team_stored(&cfg, &host, store.clone(), loaded).unwrap();

    team.submit_goal(None, "first").await.unwrap();
    until_done(&team, 1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (first, before, stages_before) = team.monitor.read(|s| {
        let t = s
            .tasks
            .values()
            .find(|t| t.task_id != team.base_task)
            .unwrap()
            .clone();
        let stages: Vec<_> = t.stage_list.iter().map(|id| s.stages[id].clone()).collect();
        (t.task_id.clone(), t, stages)
    });
    team.submit_goal(None, "second").await.unwrap();
    // The second task's end evicts the first from memory.
    let mut gone = false;
    for _ in 0..2_000 {
        gone = team.monitor.get(StateKind::Task, first.as_str()).is_none()
            && team.monitor.read(|s| s.counters().steps_running == 0);
        if gone {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "the first task left memory");
    let last = team.monitor.assigned_version();
    assert!(team.monitor.durable(last).await);

    let (task, stages) = cohort::store::stored_task(store.as_ref(), &first)
        .await
        .unwrap()
        .expect("the store has it");
    assert_eq!(task, before, "the task as it was when it finished");
    assert_eq!(stages, stages_before, "and its stages");
    assert!(!stages.is_empty() && stages.iter().all(|s| !s.completion_summary.is_empty()));
    team.shutdown().await;
    team.monitor.close();
}

/// A message whose send was stored but which its receiver had not taken when the process
/// stopped (its receipt is not in the store) is delivered after the restart, once.
#[actix::test]
async fn a_message_in_flight_at_the_stop_is_delivered_after_the_restart() {
    use cohort::event::{Change, Event, TaskChange};
    use cohort::ids::{AgentId, StageRef};
    use cohort::message::Message;
    use cohort::state::ConversationEntry;
    use cohort::store::{Store, StoredEvent};
    let scratch = Scratch::new("in-flight").unwrap();
    let shape = TeamShape {
        workers: 2,
        steps: 1,
        delay_ms: 0,
        max_in_flight: 8,
        goals: 1,
    };
    let cfg = load_team(&write_team(&scratch.0, shape, None).unwrap()).unwrap();
    let file = scratch.0.join("team.db");
    let team = open(&cfg, &file).await;
    let (base, manager) = (team.base_task.clone(), team.managers[0].clone());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let last_no = team.monitor.read(|s| s.deliveries.last_no());
    team.shutdown().await;
    team.monitor.close();
    drop(team);

    // What a crash right after SyncState's commit leaves: the goal routed, not yet taken.
    {
        let store = SqlStore::open_sqlite(&file).await.unwrap();
        let version = store.last_version().await.unwrap();
        let goal = Message::notice(
            base.clone(),
            AgentId::from("operator"),
            vec![manager.clone()],
            StageRef::NoRelative,
            "the goal sent before the crash".into(),
        );
        let sent = Change::Task(TaskChange::Conversation {
            task_id: base.clone(),
            entry: ConversationEntry {
                timestamp: "2026-11-23 12:00:00".into(),
                message: Arc::new(goal),
            },
            message_no: last_no + 1,
        });
        store
            .append(&[StoredEvent {
                event: Event {
                    version: version + 1,
                    at: 0,
                    change: sent,
                },
                task_id: Some(base.clone()),
            }])
            .await
            .unwrap();
    }

    let team = open(&cfg, &file).await;
    assert_eq!(
        team.monitor.read(|s| s.deliveries.in_flight_count()),
        1,
        "the store knows the message is in flight"
    );
    until_done(&team, 1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        team.monitor.read(|s| s.deliveries.in_flight_count()),
        0,
        "its receipt is stored"
    );
    let version = team.monitor.version();
    team.shutdown().await;
    team.monitor.close();
    drop(team);

    // Taken once: a second restart delivers nothing again.
    let team = open(&cfg, &file).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(team.monitor.version(), version, "nothing delivered twice");
    let tasks = team.monitor.read(|s| s.tasks.len());
    assert_eq!(tasks, 2, "the base task and the goal's");
    team.shutdown().await;
    team.monitor.close();
}

/// The team file is the truth for who the agents are: edited between two runs (a new profile,
/// a person added), the restarted team follows it, and the new person is in the base task.
#[actix::test]
async fn a_restart_follows_the_team_file_as_edited_since() {
    let scratch = Scratch::new("edited").unwrap();
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/operator");
    for f in ["team.yaml", "script.yaml"] {
        std::fs::copy(format!("{src}/{f}"), scratch.0.join(f)).unwrap();
    }
    let team_file = scratch.0.join("team.yaml");
    let file = scratch.0.join("team.db");
    let team = open(&load_team(&team_file).unwrap(), &file).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    team.shutdown().await;
    team.monitor.close();
    drop(team);

    let yaml = std::fs::read_to_string(&team_file).unwrap();
    let yaml = yaml
        .replace(
            "profile: Turns the operator's goals into tasks, asks the operator when in doubt, judges results.",
            "profile: Runs the team now.",
        )
        .replace(
            "humans:\n",
            "humans:\n  - id: auditor\n    name: Audrey\n    role: auditor\n    profile: Reads along.\n    password_hash: \"$argon2id$v=19$m=19456,t=2,p=1$jUcQy16DUfKKGV/lL6/6jw$aSPXFXbbjz70sKV8AbvLk3wWNpKjUlg5S0r0DZiRjNI\"\n",
        );
    assert!(yaml.contains("Runs the team now") && yaml.contains("auditor"));
    std::fs::write(&team_file, yaml).unwrap();

    let team = open(&load_team(&team_file).unwrap(), &file).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (profile, auditor, group) = team.monitor.read(|s| {
        (
            s.agents[&"manager".into()].profile.clone(),
            s.agents.contains_key(&"auditor".into()),
            s.tasks[&team.base_task].task_group.clone(),
        )
    });
    assert_eq!(profile, "Runs the team now.");
    assert!(auditor, "the new person is an agent");
    assert!(group.contains(&"auditor".into()), "{group:?}");
    team.shutdown().await;
    team.monitor.close();
    drop(team);

    // And that is stored: a third start shows the same.
    let team = open(&load_team(&team_file).unwrap(), &file).await;
    let profile = team
        .monitor
        .read(|s| s.agents[&"manager".into()].profile.clone());
    assert_eq!(profile, "Runs the team now.");
    team.shutdown().await;
    team.monitor.close();
}
