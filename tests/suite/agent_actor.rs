//! The agent actor's contract: its mailbox keeps working while a step's LLM call is in
//! flight, and it runs its steps strictly one at a time, in queue order.

use cohort::actors::Host;
use cohort::actors::{GetAgentState, start_team};
use cohort::config::load_team;
use cohort::state::{StepExecutionState, WorkingState};
use std::path::Path;
use std::time::Duration;

#[actix::test]
async fn the_mailbox_takes_messages_while_a_step_waits_for_its_llm() {
    let cfg = load_team(Path::new("tests/fixtures/slow/team.yaml")).unwrap();
    let team = start_team(&cfg, &host(&|_| None)).unwrap();
    let manager = &team.agents[&"manager".into()];
    team.submit_goal(None, "first").await.unwrap();

    // The first step is running: its answer is 1.5 s away.
    let mut state = manager.send(GetAgentState).await.unwrap();
    for _ in 0..100 {
        if state.agent_step.running().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        state = manager.send(GetAgentState).await.unwrap();
    }
    let first = state
        .agent_step
        .running()
        .expect("a running step")
        .step_id
        .clone();

    // A second message arrives and is queued while the first step still runs.
    team.submit_goal(None, "second").await.unwrap();
    let mut queued = false;
    for _ in 0..100 {
        state = manager.send(GetAgentState).await.unwrap();
        if state.agent_step.todo_len() == 1 {
            queued = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(queued, "the second message never became a queued step");
    assert_eq!(
        state.agent_step.running().map(|s| s.step_id.clone()),
        Some(first.clone()),
        "still on the first step"
    );
    assert_eq!(state.working_state, WorkingState::Working);
    let next = state
        .agent_step
        .get(state.agent_step.todo().next().unwrap())
        .unwrap();
    assert!(next.text_content.contains("second"));

    // Then all run, in queue order, one at a time: each goal is a task_manager step; each new
    // task's notice joins the end of the queue.
    for _ in 0..400 {
        state = manager.send(GetAgentState).await.unwrap();
        if state.agent_step.todo_len() == 0
            && state.agent_step.running().is_none()
            && state.agent_step.steps().len() >= 2
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let steps = state.agent_step.steps();
    let run: Vec<(String, &str)> = steps
        .iter()
        .map(|s| (s.executor.to_string(), s.text_content.as_str()))
        .collect();
    // The tasks' own steps left with their tasks: the base task's two remain.
    assert_eq!(steps.len(), 2, "{run:?}");
    assert_eq!(steps[0].step_id, first);
    assert!(
        steps
            .iter()
            .all(|s| s.execution_state == StepExecutionState::Finished)
    );
    let order: Vec<String> = run.iter().map(|(e, _)| e.clone()).collect();
    assert_eq!(order, ["task_manager", "task_manager"]);
    assert!(run[0].1.ends_with("first") && run[1].1.ends_with("second"));
    assert_eq!(
        steps[1].execute_result.as_ref().unwrap()["task_instruction"]["task_name"],
        "second"
    );
    assert_eq!(state.working_state, WorkingState::Idle);
}

/// The host a test runs the team in: the given variables and the built `cohort` binary.
fn host(vars: &dyn Fn(&str) -> Option<String>) -> Host<'_> {
    Host::new(vars, env!("CARGO_BIN_EXE_cohort"))
}
