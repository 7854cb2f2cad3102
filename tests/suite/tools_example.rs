//! The tools example end to end: a worker calls the bundled workspace server through the
//! shared MCP client in a long-tail chain (IG → tool → tool_decision …), and the file it
//! wrote is on disk afterwards.

use crate::support::scratch;
use crate::support::states;

use cohort::actors::Host;
use cohort::config::load_team;
use cohort::run::{Progress, RunOptions, RunOutcome, run_goal};
use scratch::Scratch;
use std::path::Path;

/// A private copy of the example, so the test writes into its own workspace folder.
fn copy_example() -> Scratch {
    let dir = Scratch::new("tools-example");
    for sub in ["servers", "workspace"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    for f in ["team.yaml", "script.yaml", "servers/workspace.yaml"] {
        std::fs::copy(Path::new("examples/tools").join(f), dir.join(f)).unwrap();
    }
    dir
}

#[actix::test]
async fn the_worker_writes_and_reads_back_a_file_through_the_workspace_server() {
    let dir = copy_example();
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
    let mut clerk = Vec::new();
    let report = run_goal(
        &cfg,
        "Write a greeting file",
        &RunOptions::default(),
        &host,
        |p| {
            if let Progress::Step { step, .. } = p
                && step.agent_id.as_str() == "clerk"
            {
                clerk.push(step.clone());
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);

    let chain: Vec<&str> = clerk.iter().map(|s| s.executor.name()).collect();
    assert_eq!(
        chain,
        [
            "planning",
            "instruction_generation",
            "workspace",
            "tool_decision",
            "instruction_generation",
            "workspace",
            "tool_decision",
            "instruction_generation",
            "workspace",
            "tool_decision",
            "reflection",
            "summary"
        ]
    );
    assert!(
        clerk
            .iter()
            .all(|s| s.execution_state == cohort::state::StepExecutionState::Finished),
        "{clerk:#?}"
    );
    let tools: Vec<_> = clerk
        .iter()
        .filter(|s| s.executor.name() == "workspace")
        .collect();
    let described = tools[0].execute_result.as_ref().unwrap().to_string();
    assert!(
        described.contains("write_file") && described.contains("read_file"),
        "{described}"
    );
    let read_back = tools[2].execute_result.as_ref().unwrap().to_string();
    assert!(read_back.contains("Hello from Cohort!"), "{read_back}");
    assert_eq!(
        std::fs::read_to_string(dir.join("workspace/hello.txt")).unwrap(),
        "Hello from Cohort!\n"
    );
    states::assert_quiet(&report.states);
}
