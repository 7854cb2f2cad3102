//! Several tasks at once (seed §10.3): one manager runs two tasks and one worker is allocated in
//! a stage of each, so its queue interleaves the two stages' steps. Every agent talks to a local
//! OpenAI-compatible server that answers by what each prompt asks, so the test can read every
//! prompt: a stage's prompts must show only that stage's steps.

use crate::support::openai_stub;
use crate::support::prompt_fields;
use crate::support::scratch;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use cohort::run::{RunOptions, RunOutcome, run_goal};
use openai_stub::{OpenAiStub, RecordedRequest, StubResponse};
use prompt_fields::{content, field};
use scratch::Scratch;
use serde_json::Value;
use std::time::Duration;

fn answer(req: &RecordedRequest) -> StubResponse {
    let prompt = req.prompt().unwrap_or_default();
    let (skill, task, stage) = (
        field(prompt, "executor"),
        field(prompt, "task_id"),
        field(prompt, "stage_id"),
    );
    let p = content(prompt);
    let text = match skill {
        // The manager may hire, so its goals and the runtime's notices are decision steps: a
        // notice is handed to task_manager as it is.
        // The summary of older history a long-lived manager's prompt folds in.
        _ if prompt.contains("Steps to fold into it") => "Earlier: notes were taken.".into(),
        "decision" if NOTICES.iter().any(|n| p.contains(n)) => {
            let text = serde_json::to_string(&p).unwrap();
            format!(
                r#"<planned_step>[{{"step_intention": "Act on the notice", "type": "skill", "executor": "task_manager", "text_content": {text}}}]</planned_step>"#
            )
        }
        "decision" => {
            // The operator's goal: one add_task per goal it names; a note becomes a task too.
            let plan = |executor: &str, what: &str| {
                format!(r#"{{"step_intention": "{what}", "type": "skill", "executor": "{executor}", "text_content": "{what}"}}"#)
            };
            let mut steps: Vec<String> = ["ALPHA", "BETA"]
                .into_iter()
                .filter(|g| p.contains(&format!("goal {g}")))
                .map(|g| plan("task_manager", &format!("add_task {g}")))
                .collect();
            if steps.is_empty() {
                steps.push(plan("task_manager", "add_task NOTE"));
            }
            format!("<planned_step>[{}]</planned_step>", steps.join(", "))
        }
        "task_manager" => {
            // The runtime's notices first: they quote the task intention, which names a goal.
            if p.contains("was created with you as its manager") && p.contains("Keep a note") {
                // A note's task has nothing to do: it is closed at once (as failed: no stage
                // ran, so by the runtime's honest outcomes it did not finish any work).
                format!(r#"<task_instruction>{{"action": "finish_task", "task_id": "{task}", "outcome": "failed", "task_summary": "noted"}}</task_instruction>"#)
            } else if p.contains("was created with you as its manager") {
                format!(
                    r#"<task_instruction>{{"action": "add_stage", "task_id": "{task}", "stages": [{{"stage_intention": "Work on {task}", "agent_allocation": {{"w": "Do the work of {task}"}}}}]}}</task_instruction>"#
                )
            } else if p.contains("has submitted its completion summary") {
                format!(r#"<task_instruction>{{"action": "finish_stage", "task_id": "{task}", "stage_id": "{stage}"}}</task_instruction>"#)
            } else if p.contains("has no stage left to run") {
                format!(r#"<task_instruction>{{"action": "finish_task", "task_id": "{task}", "task_summary": "done"}}</task_instruction>"#)
            } else if p.contains("add_task NOTE") {
                r#"<task_instruction>{"action": "add_task", "task_name": "NOTE", "task_intention": "Keep a note"}</task_instruction>"#.into()
            } else {
                let goal = if p.contains("add_task ALPHA") { "ALPHA" } else { "BETA" };
                format!(r#"<task_instruction>{{"action": "add_task", "task_name": "{goal}", "task_intention": "Reach goal {goal}"}}</task_instruction>"#)
            }
        }
        "planning" => {
            // Slow planning: the other task's stage starts meanwhile, so the worker's queue
            // holds both stages at once.
            let plan = r#"<planned_step>[{"step_intention": "Take notes", "type": "skill", "executor": "think", "text_content": "Take notes"}, {"step_intention": "Check", "type": "skill", "executor": "reflection", "text_content": "Check"}]</planned_step>"#;
            return StubResponse::reply(plan).with_delay(Duration::from_millis(300));
        }
        "think" => format!("<think>notes for stage {stage}</think>"),
        "reflection" => r#"<planned_step>[{"step_intention": "Sum up", "type": "skill", "executor": "summary", "text_content": "Sum up"}]</planned_step>"#.into(),
        "summary" => format!("<completion_summary>done {stage}</completion_summary>"),
        other => panic!("unexpected skill {other:?} in prompt:\n{prompt}"),
    };
    StubResponse::reply(&text).with_delay(Duration::from_millis(20))
}

const NOTICES: [&str; 3] = [
    "was created with you as its manager",
    "has submitted its completion summary",
    "has no stage left to run",
];

/// A manager that may hire (so a goal may become several tasks) and one worker, both on the
/// stub.
fn team_yaml(stub: &OpenAiStub) -> String {
    format!(
        "llm: {{provider: openai, base_url: '{}', model: m, max_retries: 0}}\n\
         agents:\n  - {{id: manager, role: manager, skills: [decision, task_manager, agent_manager]}}\n  \
         - {{id: w, role: worker, skills: [planning, reflection, summary, think]}}\n",
        stub.base_url()
    )
}

#[actix::test]
async fn two_tasks_share_one_worker_and_keep_their_stages_apart() {
    let stub = OpenAiStub::start().await;
    stub.set_fallback(answer);
    let dir = Scratch::new("multi-task");
    let file = dir.join("team.yaml");
    std::fs::write(&file, team_yaml(&stub)).unwrap();
    let cfg = load_team(&file).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "Please reach goal ALPHA")
        .await
        .unwrap();
    team.submit_goal(None, "Please reach goal BETA")
        .await
        .unwrap();

    let tasks = |team: &cohort::actors::Team| -> Vec<Value> {
        team.monitor
            .snapshot(StateKind::Task)
            .into_values()
            .filter(|t| t["task_id"] != team.base_task.as_str())
            .collect()
    };
    let mut done = false;
    for _ in 0..600 {
        let ts = tasks(&team);
        if ts.len() == 2 && ts.iter().all(|t| t["execution_state"] == "finished") {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(done, "both tasks finish: {:#?}", tasks(&team));
    team.wait_for_running_steps(Duration::from_secs(3)).await;

    let ts = tasks(&team);
    let stages: Vec<(String, String)> = ts
        .iter()
        .map(|t| {
            let list = t["stage_list"].as_array().unwrap();
            assert_eq!(list.len(), 1);
            (
                t["task_id"].as_str().unwrap().to_owned(),
                list[0].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // Each stage's summary is the worker's summary of that stage.
    for (_, s) in &stages {
        let stage = team.monitor.get(StateKind::Stage, s).unwrap();
        assert_eq!(stage["execution_state"], "finished");
        assert_eq!(stage["completion_summary"]["w"], format!("done {s}"));
    }

    // Every prompt of the worker belongs to one stage and mentions no id of the other task.
    let worker: Vec<(String, String)> = stub
        .requests()
        .iter()
        .filter_map(|r| {
            let p = r.prompt()?.to_owned();
            ["planning", "think", "reflection", "summary"]
                .contains(&field(&p, "executor"))
                .then(|| (field(&p, "stage_id").to_owned(), p))
        })
        .collect();
    assert_eq!(
        worker.len(),
        8,
        "plan, think, reflect, summarise in each stage"
    );
    for (stage, prompt) in &worker {
        let (mine, other) = if stage == &stages[0].1 {
            (&stages[0], &stages[1])
        } else {
            (&stages[1], &stages[0])
        };
        assert_eq!(stage, &mine.1);
        assert!(
            !prompt.contains(&other.0) && !prompt.contains(&other.1),
            "a prompt of stage {stage} shows the other task:\n{prompt}"
        );
        if field(prompt, "executor") == "summary" {
            assert!(
                prompt.contains(&format!("notes for stage {stage}")),
                "the summary sees its own notes:\n{prompt}"
            );
        }
    }
    // The two stages really were in flight together: the worker went back to a stage after
    // running a step of the other one.
    let order: Vec<&str> = worker.iter().map(|(s, _)| s.as_str()).collect();
    let switches = order.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches >= 2, "the stages interleave: {order:?}");

    // Both tasks are gone from the worker: no steps, no working memory, no waits. The task's
    // end reaches the worker as a message after the task's state changed, so give it a moment.
    let mut w = team.monitor.get(StateKind::Agent, "w").unwrap();
    for _ in 0..200 {
        if w["working_memory"] == serde_json::json!({}) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        w = team.monitor.get(StateKind::Agent, "w").unwrap();
    }
    assert_eq!(w["working_memory"], serde_json::json!({}), "{w:#}");
    assert_eq!(w["agent_step"]["todo"], serde_json::json!([]));
    assert_eq!(w["step_lock"], serde_json::json!([]));
    assert_eq!(w["working_state"], "idle");
    team.shutdown().await;
}

/// `cohort run` follows every task the manager creates for the goal, not just the first.
#[actix::test]
async fn a_run_whose_goal_becomes_two_tasks_ends_when_both_are_over() {
    let stub = OpenAiStub::start().await;
    stub.set_fallback(answer);
    let dir = Scratch::new("multi-task-run");
    let file = dir.join("team.yaml");
    std::fs::write(&file, team_yaml(&stub)).unwrap();
    let cfg = load_team(&file).unwrap();
    let report = run_goal(
        &cfg,
        "Please reach goal ALPHA and goal BETA",
        &RunOptions::default(),
        &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort")),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);
    let names: Vec<&str> = report.tasks.iter().map(|t| t.task_name.as_str()).collect();
    assert_eq!(names, ["ALPHA", "BETA"]);
    for t in &report.tasks {
        assert_eq!(
            t.execution_state,
            cohort::state::ExecutionState::Finished,
            "{t:#?}"
        );
    }
}

/// The base task never ends: a long-lived manager keeps only its newest finished base-task
/// steps in its own state (all stay published), so its memory does not grow with every goal.
#[actix::test]
async fn a_long_lived_manager_keeps_a_bounded_base_task_history() {
    let stub = OpenAiStub::start().await;
    stub.set_fallback(answer);
    let dir = Scratch::new("multi-task-long");
    let file = dir.join("team.yaml");
    std::fs::write(&file, team_yaml(&stub)).unwrap();
    let cfg = load_team(&file).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    const NOTES: usize = 80;
    for i in 0..NOTES {
        team.submit_goal(None, &format!("note {i}")).await.unwrap();
    }
    let done = |team: &cohort::actors::Team| {
        team.monitor
            .snapshot(StateKind::Task)
            .values()
            .filter(|t| t["task_name"] == "NOTE" && t["execution_state"] == "failed")
            .count()
    };
    for _ in 0..800 {
        if done(&team) == NOTES {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        done(&team),
        NOTES,
        "every note became a task, closed at once"
    );
    let m = team.monitor.get(StateKind::Agent, "manager").unwrap();
    let kept = m["agent_step"]["step_list"].as_array().unwrap().len();
    assert_eq!(kept, 64, "the manager keeps its newest 64 base-task steps");
    let base = team.base_task.as_str();
    assert_eq!(
        m["working_memory"][base]["no_relative"]
            .as_array()
            .unwrap()
            .len(),
        kept
    );
    team.shutdown().await;
}
