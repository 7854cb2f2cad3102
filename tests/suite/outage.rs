//! An endpoint that stops answering for a while (every call HTTP 500) a few calls into a goal
//! strands nothing: the steps that needed it wait (their wait and its reason published on the
//! step), one probe at a time goes out, and once the endpoint answers again the goal runs to a
//! finished task. An endpoint that stays down past `waits.model_secs` ends the task failed,
//! saying why.

use crate::support::competent;
use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::event::{Change, StepChange};
use cohort::monitor::StateKind;
use competent::competent;
use openai_stub::{OpenAiStub, StubResponse};
use scratch::Scratch;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The team on the stub at `base_url`, in a fresh folder: the folder's guard and the file.
fn team_file(base_url: &str, name: &str, extra: &str) -> (Scratch, std::path::PathBuf) {
    let dir = Scratch::new(&format!("outage-{name}"));
    let f = dir.join("team.yaml");
    std::fs::write(
        &f,
        format!(
            "llm: {{provider: openai, base_url: '{base_url}', model: m, timeout_secs: 2, max_retries: 1}}\n\
             agents:\n\
             \x20 - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: writer, role: writer, skills: [planning, think, reflection, summary, process_message, decision]}}\n\
             {extra}"
        ),
    )
    .unwrap();
    (dir, f)
}

/// Answers competently, except from the `from`-th call on for `down`: every call then is a 500.
fn down_for_a_while(stub: &OpenAiStub, from: usize, down: Duration) -> Arc<AtomicUsize> {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let down_until: Mutex<Option<Instant>> = Mutex::new(None);
    stub.set_fallback(move |req| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        let mut until = down_until.lock().unwrap();
        if n == from {
            *until = Some(Instant::now() + down);
        }
        match *until {
            Some(t) if Instant::now() < t => StubResponse::error(500, "upstream is down"),
            _ => StubResponse::reply_with_usage(&competent(req), 100, 20),
        }
    });
    calls
}

fn host(vars: &dyn Fn(&str) -> Option<String>) -> Host<'_> {
    Host::new(vars, env!("CARGO_BIN_EXE_cohort"))
}

/// Waits until a task other than the base task is over; its state.
async fn task_over(team: &cohort::actors::Team, within: Duration) -> Option<Value> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let tasks = team.monitor.snapshot(StateKind::Task);
        let over = tasks.values().find(|t| {
            t["task_name"] != "MAS base task"
                && ["finished", "failed"].contains(&t["execution_state"].as_str().unwrap_or(""))
        });
        if let Some(t) = over {
            return Some(t.clone());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[actix::test]
async fn a_goal_waits_out_an_outage_of_its_endpoint_and_finishes() {
    let stub = OpenAiStub::start().await;
    let calls = down_for_a_while(&stub, 3, Duration::from_secs(5));
    let (_dir, file) = team_file(&stub.base_url(), "back", "");
    let cfg = load_team(&file).unwrap();
    let team = start_team(&cfg, &host(&|_| None)).unwrap();
    let mut events = team.monitor.subscribe();
    let waits = Arc::new(Mutex::new(Vec::new()));
    let seen = waits.clone();
    let watcher = tokio::spawn(async move {
        while let Ok(ev) = events.recv().await {
            if let Change::Step(StepChange::Updated { update, .. }) = &ev.event.change
                && let Some(Some(wait)) = &update.model_wait
            {
                seen.lock().unwrap().push(wait.reason.clone());
            }
        }
    });
    team.submit_goal(None, "Please reach GOAL<g1>.")
        .await
        .unwrap();
    let task = task_over(&team, Duration::from_secs(90)).await;
    watcher.abort();
    let task = task.expect("the task ended");
    assert_eq!(task["execution_state"], "finished", "{task}");
    let waits = waits.lock().unwrap().clone();
    assert!(!waits.is_empty(), "a step showed its wait for the endpoint");
    assert!(waits[0].contains("HTTP 500"), "{waits:?}");
    let steps = team.monitor.snapshot(StateKind::Step);
    assert!(
        steps.values().all(|s| s["execution_state"] != "failed"),
        "no step failed for the outage"
    );
    assert!(
        steps.values().all(|s| s.get("model_wait").is_none()),
        "no step waits any more"
    );
    // A few probes, not a call per waiting step every half second.
    assert!(calls.load(Ordering::SeqCst) < 60, "{calls:?} calls");
    team.shutdown().await;
}

#[actix::test]
async fn an_endpoint_down_past_the_wait_fails_its_task_with_the_reason() {
    let stub = OpenAiStub::start().await;
    down_for_a_while(&stub, 3, Duration::from_secs(3600));
    let (_dir, file) = team_file(&stub.base_url(), "gone", "waits: {model_secs: 3}\n");
    let cfg = load_team(&file).unwrap();
    let team = start_team(&cfg, &host(&|_| None)).unwrap();
    team.submit_goal(None, "Please reach GOAL<g1>.")
        .await
        .unwrap();
    let task = task_over(&team, Duration::from_secs(60))
        .await
        .expect("the task ended");
    assert_eq!(task["execution_state"], "failed", "{task}");
    assert_eq!(
        task["summary_written"]["written"], "endpoint_down",
        "{task}"
    );
    let why = task["outcome"]["why"].as_str().unwrap_or_default();
    assert!(
        why.contains("did not answer") && why.contains("waits.model_secs"),
        "{why}"
    );
    team.shutdown().await;
}
