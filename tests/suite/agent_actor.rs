//! The agent actor's contract: its mailbox keeps working while a step's LLM call is in
//! flight, and it runs its steps strictly one at a time, in queue order.

use cohort::actors::Host;
use cohort::actors::{GetAgentState, start_team};
use cohort::config::load_team;
use cohort::state::{StepExecutionState, WorkingState};
use std::path::Path;
use std::sync::Arc;
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

/// A SyncState that answers each hand-over only once told to, and keeps the messages handed
/// over, in the order they reached it.
struct HeldSync {
    release: tokio::sync::watch::Sender<bool>,
    arrived: Arc<std::sync::Mutex<Vec<String>>>,
}

impl actix::Actor for HeldSync {
    type Context = actix::Context<Self>;
}

impl actix::Handler<cohort::actors::SubmitMessages> for HeldSync {
    type Result = actix::ResponseFuture<Result<(), cohort::team::SyncError>>;
    fn handle(&mut self, m: cohort::actors::SubmitMessages, _: &mut Self::Context) -> Self::Result {
        let contents = m.messages.iter().map(|m| m.message.clone());
        self.arrived.lock().unwrap().extend(contents);
        let mut release = self.release.subscribe();
        Box::pin(async move {
            let _ = release.wait_for(|r| *r).await;
            Ok(())
        })
    }
}

impl actix::Handler<cohort::actors::ApplyOutput> for HeldSync {
    type Result = Result<(), cohort::team::SyncError>;
    fn handle(&mut self, _: cohort::actors::ApplyOutput, _: &mut Self::Context) -> Self::Result {
        Ok(())
    }
}

impl actix::Handler<cohort::actors::CheckTaskInstruction> for HeldSync {
    type Result = Result<(), cohort::team::SyncError>;
    fn handle(
        &mut self,
        _: cohort::actors::CheckTaskInstruction,
        _: &mut Self::Context,
    ) -> Self::Result {
        Ok(())
    }
}

/// An outlet that publishes nowhere.
struct Nowhere;

impl cohort::actors::Outlet for Nowhere {
    fn publish(&self, _: Vec<cohort::event::Change>) {}
    fn stored(&self) -> futures::future::BoxFuture<'static, bool> {
        Box::pin(async { true })
    }
    fn writing(&self, _: &cohort::ids::AgentId, _: &cohort::ids::StepId, _: &str) {}
    fn receivers(&self, _: usize) -> Vec<String> {
        Vec::new()
    }
    fn keep_blob(&self, _: cohort::call::media::Blob) {}
    fn blob(&self, _: &cohort::call::media::BlobId) -> Option<Arc<cohort::call::media::Blob>> {
        None
    }
}

/// An agent's hand-overs reach SyncState one at a time, in the order it made them: a person's
/// second message is handed over only once SyncState answered the first. actix lets a send
/// that found SyncState's mailbox full in after a later send that found room, so two
/// hand-overs under way at once could be stored in the wrong order.
#[actix::test]
async fn an_agents_hand_overs_reach_sync_state_one_at_a_time_in_their_order() {
    use actix::Actor;
    use cohort::actors::HumanSend;
    use cohort::state::{AgentState, HumanConfig};
    let mut state = AgentState::new("op".into(), "Op".into(), "operator".into(), String::new());
    state.human_config = Some(HumanConfig {
        display_name: "Op".into(),
    });
    let (release, _) = tokio::sync::watch::channel(false);
    let arrived = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sync = HeldSync {
        release: release.clone(),
        arrived: arrived.clone(),
    }
    .start();
    let person = cohort::actors::AgentActor::new(
        cohort::state::Agent::from(state),
        None,
        Arc::new(cohort::prompt::PromptSet::builtin(
            cohort::prompt::Language::En,
        )),
        cohort::actors::AgentTools::default(),
        cohort::actors::SyncLink::to(&sync),
        Arc::new(Nowhere),
    )
    .start();
    let says = |content: &str| {
        HumanSend(cohort::step::HumanMessage {
            choice: None,
            attachments: Vec::new(),
            task_id: "t1".into(),
            receiver: vec!["manager".into()],
            content: content.into(),
            stage_relative: cohort::ids::StageRef::NoRelative,
            need_reply: false,
            waiting: false,
            wait_secs: None,
            traceparent: None,
        })
    };
    let first = tokio::spawn(person.send(says("first")));
    let second = tokio::spawn(person.send(says("second")));

    let mut one = false;
    for _ in 0..200 {
        if !arrived.lock().unwrap().is_empty() {
            one = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(one, "the first message was not handed over");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        *arrived.lock().unwrap(),
        ["first"],
        "the second is handed over once the first is answered"
    );
    release.send_replace(true);
    first.await.unwrap().unwrap().unwrap();
    second.await.unwrap().unwrap().unwrap();
    assert_eq!(*arrived.lock().unwrap(), ["first", "second"]);
}
