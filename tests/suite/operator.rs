//! The operator example without the web: the person gives the goal as the human agent, the
//! manager asks a waiting question, the person answers it (the answer returns the wait id and
//! the manager's step lock is released), and the task finishes.

use cohort::actors::{GetAgentState, Host, HumanSend, start_team};
use cohort::config::load_team;
use cohort::ids::{AgentId, StageRef};
use cohort::monitor::StateKind;
use cohort::step::HumanMessage;
use std::path::Path;
use std::time::Duration;

/// One goal of the operator example, from the person's message to its finished task: the
/// manager's waiting question is answered (the answer returns the wait id), the writer's plan
/// confirmed; returns the new task's id.
async fn one_goal(team: &cohort::actors::Team, need_reply: bool) -> String {
    let operator = &team.agents[&AgentId::from("operator")];
    let manager = &team.agents[&AgentId::from("manager")];
    let before = team.monitor.snapshot(StateKind::Task);
    let goal = HumanMessage {
        choice: None,
        attachments: Vec::new(),
        task_id: team.base_task.clone(),
        receiver: vec!["manager".into()],
        content: "Write a haiku".into(),
        stage_relative: StageRef::NoRelative,
        need_reply,
        waiting: false,
        wait_secs: None,
        traceparent: None,
    };
    operator.send(HumanSend(goal)).await.unwrap().unwrap();

    // The manager's question arrives, waiting, and the manager is locked.
    let mut question = None;
    for _ in 0..400 {
        let me = operator.send(GetAgentState).await.unwrap();
        let pool = me.conversation_pool.unwrap();
        if let Some(q) = pool
            .conversation_privates
            .get(&AgentId::from("manager"))
            .and_then(|c| c.iter().find(|m| m.waiting && !m.replied))
        {
            question = Some(q.clone());
            assert!(
                pool.global_messages
                    .iter()
                    .any(|n| n.contains("waiting for your reply"))
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let question = question.expect("the manager asked a waiting question");
    assert_eq!(
        manager.send(GetAgentState).await.unwrap().step_lock.len(),
        1
    );

    let answer = HumanMessage {
        choice: None,
        attachments: Vec::new(),
        task_id: question.task_id.clone(),
        receiver: vec!["manager".into()],
        content: "Autumn".into(),
        stage_relative: StageRef::NoRelative,
        need_reply,
        waiting: false,
        wait_secs: None,
        traceparent: None,
    };
    let sent = operator.send(HumanSend(answer)).await.unwrap().unwrap();
    assert_eq!(sent[0].return_waiting_id, question.return_waiting_id);

    // The example's plans wait for the operator's check: the writer's is confirmed as it is.
    let mut confirmed = false;
    for _ in 0..400 {
        let plan = team.monitor.read(|s| {
            s.steps()
                .find(|st| cohort::step::plan_check::awaits_check(st))
                .cloned()
        });
        if let Some(step) = plan {
            let check = cohort::step::plan_check::PlanCheck::of(&step).unwrap();
            let decide = cohort::actors::Decide {
                step_id: step.step_id.clone(),
                by: "operator".into(),
                verdict: cohort::step::approval::Verdict::ApprovePlan {
                    plan_hash: check.plan_hash,
                    steps: None,
                },
            };
            team.dispatcher
                .send(cohort::actors::DecideFor(step.agent_id.clone(), decide))
                .await
                .unwrap()
                .unwrap();
            confirmed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(confirmed, "the writer's plan waited for the operator");

    for _ in 0..400 {
        let tasks = team.monitor.snapshot(StateKind::Task);
        let done = tasks.iter().find(|(id, t)| {
            !before.contains_key(*id)
                && t["task_name"] == "Haiku for the operator"
                && t["execution_state"] == "finished"
        });
        if let Some((id, _)) = done {
            return id.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the task never finished: {:#?}",
        team.monitor.snapshot(StateKind::Task)
    );
}

/// The example runs goal after goal (its script is made of rules), a goal sent with
/// need_reply (the API's default) as well, and the person is told each task's end.
#[actix::test]
async fn the_person_answers_the_managers_waiting_question_and_the_task_finishes() {
    let cfg = load_team(Path::new("examples/operator/team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let first = one_goal(&team, false).await;
    let second = one_goal(&team, true).await;
    assert_ne!(first, second);

    let manager = &team.agents[&AgentId::from("manager")];
    assert!(
        manager
            .send(GetAgentState)
            .await
            .unwrap()
            .step_lock
            .is_empty()
    );
    let me = team.agents[&AgentId::from("operator")]
        .send(GetAgentState)
        .await
        .unwrap();
    assert!(
        me.agent_step.steps().len() >= 4,
        "the person's sends are recorded as steps"
    );
    let told: Vec<&String> = me
        .conversation_pool
        .as_ref()
        .unwrap()
        .global_messages
        .iter()
        .filter(|n| n.starts_with("Your task \"Haiku for the operator\" finished."))
        .collect();
    assert_eq!(
        told.len(),
        2,
        "the person is told of each task's end: {told:?}"
    );
    assert!(told[0].contains("Cold rain on the eaves"), "{}", told[0]);
    // Sent with need_reply (the goal and the answer), nothing failed: the manager replied.
    let failed: Vec<String> = team.monitor.read(|s| {
        s.steps()
            .filter(|st| st.execution_state == cohort::state::StepExecutionState::Failed)
            .map(|st| format!("{}: {}", st.agent_id, st.step_intention))
            .collect()
    });
    assert!(failed.is_empty(), "{failed:?}");
}

#[actix::test]
async fn an_unanswered_question_runs_out_of_time_and_the_manager_goes_on() {
    let mut cfg = load_team(Path::new("examples/operator/team.yaml")).unwrap();
    cfg.waits.human = Duration::from_millis(300);
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let operator = &team.agents[&AgentId::from("operator")];
    let manager = &team.agents[&AgentId::from("manager")];
    let goal = HumanMessage {
        choice: None,
        attachments: Vec::new(),
        task_id: team.base_task.clone(),
        receiver: vec!["manager".into()],
        content: "Write a haiku".into(),
        stage_relative: StageRef::NoRelative,
        need_reply: false,
        waiting: false,
        wait_secs: None,
        traceparent: None,
    };
    operator.send(HumanSend(goal)).await.unwrap().unwrap();

    // Nobody answers the manager's waiting question: its wait gives up, and the manager gets
    // a decision step saying whose reply never came.
    let mut gave_up = None;
    for _ in 0..400 {
        let m = manager.send(GetAgentState).await.unwrap();
        if let Some(s) = m
            .agent_step
            .steps()
            .iter()
            .find(|s| s.step_intention.contains("No reply from agent `operator`"))
        {
            gave_up = Some((s.executor.to_string(), m.step_lock.len()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (executor, waits) = gave_up.expect("the manager's wait never ran out");
    assert_eq!(executor, "decision");
    // The example's manager goes on without the answer: the writing stage is added.
    let mut staged = false;
    for _ in 0..400 {
        staged = team
            .monitor
            .snapshot(StateKind::Stage)
            .values()
            .any(|s| s["stage_intention"] == "Write the haiku");
        if staged {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(staged, "the manager never went on without the answer");
    assert_eq!(
        waits, 0,
        "the wait that ran out no longer locks the manager"
    );
}
