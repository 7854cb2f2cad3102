//! The quickstart scenario end to end, in process and through the `cohort` binary: a manager
//! and two workers carry a goal through two stages to a finished task.

use crate::support::states;

use cohort::actors::Host;
use cohort::config::load_team;
use cohort::run::{RunOptions, RunOutcome, run_goal};
use serde_json::Value;
use states::*;
use std::path::Path;
use std::process::Command;

const TEAM: &str = "examples/quickstart/team.yaml";

fn assert_quickstart(s: &Value) {
    let task = the_task(s);
    assert_eq!(task["execution_state"], "finished");
    assert!(
        task["task_summary"]
            .as_str()
            .unwrap()
            .contains("Cold rain on the eaves")
    );
    assert_eq!(stages_of(s, task).len(), 2);
    assert_stages_finished(s, task);
    assert_quiet(s);
    assert_wait_round_trip(task, "writer", "reviewer");
    let run = executors_run(s);
    for skill in [
        "planning",
        "think",
        "quick_think",
        "send_message",
        "process_message",
        "reflection",
        "summary",
        "task_manager",
    ] {
        assert!(run.iter().any(|e| e == skill), "no finished {skill} step");
    }
    assert_eq!(
        run.iter().filter(|e| *e == "task_manager").count(),
        5,
        "add_task, add_stage, 2 × finish_stage, finish_task"
    );
    let failed: Vec<_> = steps(s)
        .into_iter()
        .filter(|st| st["execution_state"] == "failed")
        .collect();
    assert!(failed.is_empty(), "steps failed: {failed:?}");
    assert!(task["token_usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(
        s["agent"]["writer"]["token_usage"]["completion_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        s["agent"]["writer"]["persistent_memory"]
            .as_object()
            .unwrap()
            .len()
            == 1
    );
}

#[actix::test]
async fn quickstart_runs_to_a_finished_task_in_process() {
    let cfg = load_team(Path::new(TEAM)).unwrap();
    let mut seen = 0;
    let report = run_goal(
        &cfg,
        "Write a haiku about autumn rain",
        &RunOptions::default(),
        &host(&|_| None),
        |_| seen += 1,
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);
    assert!(seen >= 20, "progress saw {seen} steps");
    assert_quickstart(&report.states);
    // The run's tokens are what every agent spent, also outside the goal's task (the
    // manager's steps in the base task).
    let agents: u64 = report.states["agent"]
        .as_object()
        .unwrap()
        .values()
        .map(|a| a["token_usage"]["prompt_tokens"].as_u64().unwrap())
        .sum();
    let in_tasks: u64 = report
        .tasks
        .iter()
        .map(|t| t.token_usage.prompt_tokens)
        .sum();
    assert_eq!(report.tokens.prompt_tokens, agents);
    assert!(agents > 0 && agents >= in_tasks, "{agents} vs {in_tasks}");
}

#[test]
fn cohort_run_json_prints_the_final_states_and_exits_zero() {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args([
            "run",
            "--team",
            TEAM,
            "--goal",
            "Write a haiku about autumn rain",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stderr}", out.status);
    let s: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    for kind in ["task", "stage", "agent", "step"] {
        assert!(s[kind].is_object(), "no {kind} map");
    }
    assert_quickstart(&s);
    assert!(
        stderr.contains("writer") && stderr.contains("send_message"),
        "progress lines on stderr:\n{stderr}"
    );
}

#[test]
fn cohort_run_prints_the_summary_and_a_limit_exits_two() {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["run", "--team", TEAM, "--goal", "Write a haiku"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("# Autumn rain haiku"));

    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args([
            "run",
            "--team",
            TEAM,
            "--goal",
            "Write a haiku",
            "--max-steps",
            "5",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-steps"));
}

#[actix::test]
async fn quickstart_runs_with_the_chinese_prompt_set_too() {
    let mut cfg = load_team(Path::new(TEAM)).unwrap();
    cfg.language = cohort::prompt::Language::Zh;
    let report = run_goal(
        &cfg,
        "写一首关于秋雨的俳句",
        &RunOptions::default(),
        &host(&|_| None),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);
    assert_quickstart(&report.states);
}

/// The host a test runs the team in: the given variables and the built `cohort` binary.
fn host(vars: &dyn Fn(&str) -> Option<String>) -> Host<'_> {
    Host::new(vars, env!("CARGO_BIN_EXE_cohort"))
}
