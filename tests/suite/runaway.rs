//! A model that opens work without end is held by the runtime, not by its prompt or schema:
//! answered over real HTTP in the tag format (`structured_output: off`, as an endpoint that
//! ignores the schema would), a manager that answers `add_task` to every step (the goal and
//! each "task created" notice) leaves one goal with one task, which ends failed with the
//! refusal recorded, instead of thousands of tasks.

use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::Host;
use cohort::config::load_team;
use cohort::run::{RunOptions, RunOutcome, run_goal};
use openai_stub::{OpenAiStub, StubResponse};
use scratch::Scratch;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The team on the stub at `base_url`, in a fresh folder: the folder's guard and the file.
fn team_file(base_url: &str, extra: &str) -> (Scratch, std::path::PathBuf) {
    let dir = Scratch::new("runaway");
    let f = dir.join("team.yaml");
    std::fs::write(
        &f,
        format!(
            "llm: {{provider: openai, base_url: '{base_url}', model: m, max_retries: 0, structured_output: off}}\n\
             agents:\n\
             \x20 - {{id: manager, name: Mira, role: manager, skills: [task_manager]}}\n\
             \x20 - {{id: writer, name: Wren, role: writer, skills: [planning, summary, think]}}\n\
             {extra}"
        ),
    )
    .unwrap();
    (dir, f)
}

fn host(vars: &dyn Fn(&str) -> Option<String>) -> Host<'_> {
    Host::new(vars, std::path::PathBuf::from(env!("CARGO_BIN_EXE_cohort")))
}

#[actix::test]
async fn a_manager_answering_add_task_to_every_notice_opens_one_task_for_one_goal() {
    let stub = OpenAiStub::start().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    stub.set_fallback(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        StubResponse::reply(
            "<task_instruction>{\"action\": \"add_task\", \"task_name\": \"More\", \
             \"task_intention\": \"Write a haiku about autumn rain\"}</task_instruction>",
        )
    });
    let (_dir, file) = team_file(&stub.base_url(), "");
    let cfg = load_team(&file).unwrap();
    let opts = RunOptions {
        timeout: Duration::from_secs(60),
        ..RunOptions::default()
    };
    let report = run_goal(
        &cfg,
        "Write a haiku about autumn rain",
        &opts,
        &host(&|_| None),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.tasks.len(), 1, "one goal, one task");
    assert_eq!(report.outcome, RunOutcome::Failed, "{:?}", report.outcome);
    let refused = report.states["step"]
        .as_object()
        .unwrap()
        .values()
        .filter(|s| s["execution_state"] == "failed")
        .filter_map(|s| s["execute_result"]["error"].as_str())
        .any(|e| e.contains("add_task is given only in the base task"));
    assert!(
        refused,
        "the refusal is on record: {}",
        report.states["step"]
    );
    // The manager's first answer, its refusal's second try and nothing more per notice.
    assert!(
        calls.load(Ordering::SeqCst) < 20,
        "{} calls",
        calls.load(Ordering::SeqCst)
    );
}
