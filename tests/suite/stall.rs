//! A task nobody works on any more is reported: the person whose goal it serves gets a notice
//! that it stalled (once), naming its manager. `tests/fixtures/stall`: the manager creates the
//! task and gives its stage to the person, who never acts on it.

use cohort::actors::{GetAgentState, Host, HumanSend, start_team};
use cohort::config::load_team;
use cohort::ids::{AgentId, StageRef};
use cohort::monitor::StateKind;
use cohort::step::HumanMessage;
use std::path::Path;
use std::time::Duration;

#[actix::test]
async fn a_task_nobody_works_on_tells_its_goal_giver_it_stalled() {
    let cfg = load_team(Path::new("tests/fixtures/stall/team.yaml")).unwrap();
    assert_eq!(cfg.waits.stall, Duration::from_secs(1));
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let operator = &team.agents[&AgentId::from("operator")];
    let goal = HumanMessage {
        choice: None,
        attachments: Vec::new(),
        task_id: team.base_task.clone(),
        receiver: vec!["manager".into()],
        content: "Do something".into(),
        stage_relative: StageRef::NoRelative,
        need_reply: true,
        waiting: false,
        wait_secs: None,
        traceparent: None,
    };
    operator.send(HumanSend(goal)).await.unwrap().unwrap();

    let stalled = |n: &String| n.starts_with("Your task \"Stuck task\" has stalled");
    let mut told = Vec::new();
    for _ in 0..400 {
        let me = operator.send(GetAgentState).await.unwrap();
        told = me.conversation_pool.unwrap().global_messages;
        if told.iter().any(stalled) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let notice = told.iter().find(|n| stalled(n)).unwrap_or_else(|| {
        panic!(
            "no stall notice: {told:#?}\ntasks: {:#?}",
            team.monitor.snapshot(StateKind::Task)
        )
    });
    assert!(notice.contains("`manager`"), "{notice}");
    // The task is still open: only a person or its manager may end it.
    let tasks = team.monitor.snapshot(StateKind::Task);
    let stuck = tasks
        .values()
        .find(|t| t["task_name"] == "Stuck task")
        .unwrap();
    assert_eq!(stuck["execution_state"], "running");
    assert_eq!(stuck["requested_by"], "operator");
    // Once, however long it stays so.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let me = operator.send(GetAgentState).await.unwrap();
    let n = me
        .conversation_pool
        .unwrap()
        .global_messages
        .iter()
        .filter(|n| stalled(n))
        .count();
    assert_eq!(n, 1);
}
