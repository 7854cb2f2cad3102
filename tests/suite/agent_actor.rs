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

/// A SyncState that answers each hand-over only once told to, storing (here: publishing) the
/// agent's changes and the step's closing then, as SyncState does in one commit; it counts
/// the hand-overs that reached it.
struct HeldSync {
    outlet: Arc<Kept>,
    release: tokio::sync::watch::Sender<bool>,
    arrived: Arc<std::sync::atomic::AtomicUsize>,
}

impl actix::Actor for HeldSync {
    type Context = actix::Context<Self>;
}

impl actix::Handler<cohort::actors::ApplyOutput> for HeldSync {
    type Result = actix::ResponseFuture<Result<(), cohort::team::SyncError>>;
    fn handle(&mut self, m: cohort::actors::ApplyOutput, _: &mut Self::Context) -> Self::Result {
        self.arrived
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (outlet, mut release) = (self.outlet.clone(), self.release.subscribe());
        Box::pin(async move {
            let _ = release.wait_for(|r| *r).await;
            let mut changes = m.held;
            if let Some(s) = m.settle {
                changes.extend(s.changes(s.failure.as_deref()));
            }
            outlet.kept.lock().unwrap().extend(changes);
            Ok(())
        })
    }
}

impl actix::Handler<cohort::actors::SubmitMessages> for HeldSync {
    type Result = Result<(), cohort::team::SyncError>;
    fn handle(&mut self, _: cohort::actors::SubmitMessages, _: &mut Self::Context) -> Self::Result {
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

/// An outlet that keeps what the agent published.
#[derive(Default)]
struct Kept {
    kept: std::sync::Mutex<Vec<cohort::event::Change>>,
}

impl Kept {
    /// Whether step `id` was started or changed in what was published so far (its being
    /// added, before the agent started, is not counted).
    fn moved(&self, id: &cohort::ids::StepId) -> bool {
        use cohort::event::{Change, StepChange};
        let kept = self.kept.lock().unwrap();
        kept.iter().any(|c| {
            matches!(c, Change::Step(StepChange::Started { step_id, .. }
                | StepChange::Updated { step_id, .. }) if step_id == id)
        })
    }
}

impl cohort::actors::Outlet for Kept {
    fn publish(&self, changes: Vec<cohort::event::Change>) {
        self.kept.lock().unwrap().extend(changes);
    }
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

/// A step's end SyncState cannot refuse (a thought: no message, no instruction) does not hold
/// the agent's next step: it runs while SyncState stores the first (over NATS that is a round
/// trip of 10–60 ms a step in a wide goal), and what it does is held back until SyncState
/// answered, so nothing of it is stored before the end it follows; its own end is handed over
/// after the first's answer.
#[actix::test]
async fn a_step_end_sync_state_cannot_refuse_does_not_hold_the_next_step() {
    use actix::Actor;
    use cohort::state::{AgentState, Executor, Skill, StepState};
    let script =
        "replies:\n  w:\n    think:\n      - '<think>one</think>'\n      - '<think>two</think>'\n";
    let model = cohort::llm::scripted::ScriptedModel::new(
        cohort::llm::scripted::Script::parse(script).unwrap(),
    );
    let mut state = cohort::state::Agent::from(AgentState::new(
        "w".into(),
        "W".into(),
        "worker".into(),
        String::new(),
    ));
    let step = |n: &str| {
        StepState::new(
            cohort::ids::TaskId::from("t1"),
            cohort::ids::StageRef::NoRelative,
            "w".into(),
            Executor::Skill(Skill::Think),
            n,
            n,
        )
    };
    let (first, second) = (step("first thought"), step("second thought"));
    let ids = (first.step_id.clone(), second.step_id.clone());
    state.add_next_steps(vec![first, second]);
    let outlet = Arc::new(Kept::default());
    let (release, _) = tokio::sync::watch::channel(false);
    let arrived = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sync = HeldSync {
        outlet: outlet.clone(),
        release: release.clone(),
        arrived: arrived.clone(),
    }
    .start();
    let agent = cohort::actors::AgentActor::new(
        state,
        Some(model as Arc<dyn cohort::llm::ChatModel>),
        Arc::new(cohort::prompt::PromptSet::builtin(
            cohort::prompt::Language::En,
        )),
        cohort::actors::AgentTools::default(),
        cohort::actors::SyncLink::to(&sync),
        outlet.clone(),
    )
    .start();

    // Both thoughts are had while SyncState holds the first one's end.
    let mut both = false;
    for _ in 0..200 {
        let s = agent.send(GetAgentState).await.unwrap();
        let state_of = |id| s.agent_step.get(id).map(|st| st.execution_state);
        if state_of(&ids.1) == Some(StepExecutionState::Finished) {
            assert_eq!(state_of(&ids.0), Some(StepExecutionState::Finished));
            both = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        both,
        "the second step waited for SyncState's answer to the first"
    );
    assert!(
        !outlet.moved(&ids.1),
        "nothing of the second step goes out before the first's end is stored"
    );
    assert_eq!(
        arrived.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the second step's end is handed over once the first's is answered, so the two reach \
         SyncState in their order whatever room its mailbox has"
    );

    // Answered: everything goes out, the second step's end after the first's.
    release.send_replace(true);
    let mut out = false;
    for _ in 0..200 {
        if outlet.moved(&ids.1) {
            out = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        out,
        "the second step's changes went out once SyncState answered"
    );
}
