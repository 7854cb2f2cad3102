//! A stage whose history outgrows the model's context (seed 004): the worker's think steps
//! return long notes and its model states a small context window, so its later prompts leave
//! older steps out; before such a step the worker asks its model to summarize them, and the
//! step's prompt shows that summary in their place. The summary is redone only every few
//! left-out steps, and goes with the stage.

use crate::support::openai_stub;
use crate::support::prompt_fields;
use crate::support::scratch;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use openai_stub::{OpenAiStub, RecordedRequest, StubResponse};
use prompt_fields::{content, field};
use scratch::Scratch;
use std::time::Duration;

const THINKS: usize = 12;

fn system(req: &RecordedRequest) -> &str {
    req.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
}

fn answer(req: &RecordedRequest) -> StubResponse {
    if system(req).starts_with("Summarize your earlier work") {
        return StubResponse::reply("SUMMARY-OF-OLDER-NOTES: the notes so far are drafts.");
    }
    let prompt = req.prompt().unwrap_or_default();
    let (task, stage) = (field(prompt, "task_id"), field(prompt, "stage_id"));
    let now = content(prompt);
    let text = match field(prompt, "executor") {
        "decision" => r#"<planned_step>[{"step_intention": "add_task", "type": "skill", "executor": "task_manager", "text_content": "add_task"}]</planned_step>"#.to_owned(),
        "task_manager" if now.contains("was created with you as its manager") => format!(
            r#"<task_instruction>{{"action": "add_stage", "task_id": "{task}", "stages": [{{"stage_intention": "Take notes", "agent_allocation": {{"w": "Take {THINKS} notes"}}}}]}}</task_instruction>"#
        ),
        "task_manager" if now.contains("has submitted its completion summary") => format!(
            r#"<task_instruction>{{"action": "finish_stage", "task_id": "{task}", "stage_id": "{stage}"}}</task_instruction>"#
        ),
        "task_manager" if now.contains("has no stage left to run") => format!(
            r#"<task_instruction>{{"action": "finish_task", "task_id": "{task}", "task_summary": "done"}}</task_instruction>"#
        ),
        "task_manager" => r#"<task_instruction>{"action": "add_task", "task_name": "Notes", "task_intention": "Take notes"}</task_instruction>"#.to_owned(),
        "planning" => {
            let steps: Vec<String> = (0..THINKS)
                .map(|i| format!(r#"{{"step_intention": "Note {i}", "type": "skill", "executor": "think", "text_content": "Write note {i}"}}"#))
                .collect();
            format!("<planned_step>[{}]</planned_step>", steps.join(", "))
        }
        "think" => format!("<think>NOTE: {}</think>", "a long observation ".repeat(300)),
        "reflection" => r#"<planned_step>[{"step_intention": "Sum up", "type": "skill", "executor": "summary", "text_content": "Sum up"}]</planned_step>"#.to_owned(),
        "summary" => "<completion_summary>Took the notes.</completion_summary>".to_owned(),
        other => panic!("unexpected skill {other:?}:\n{prompt}"),
    };
    StubResponse::reply(&text)
}

#[actix::test]
async fn older_history_left_out_of_a_prompt_is_summarized_and_shown_in_its_place() {
    let stub = OpenAiStub::start().await;
    stub.set_fallback(answer);
    let dir = Scratch::new("history-summary");
    let file = dir.join("team.yaml");
    std::fs::write(
        &file,
        format!(
            "llm: {{provider: openai, base_url: '{}', model: m, max_retries: 0, context_window: 9000, max_tokens: 500}}\n\
             agents:\n  - {{id: manager, role: manager, skills: [decision, task_manager]}}\n  \
             - {{id: w, role: worker, skills: [planning, reflection, summary, think]}}\n",
            stub.base_url()
        ),
    )
    .unwrap();
    let cfg = load_team(&file).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "Take notes").await.unwrap();
    let mut done = false;
    for _ in 0..1200 {
        done = team
            .monitor
            .snapshot(StateKind::Task)
            .values()
            .any(|t| t["task_name"] == "Notes" && t["execution_state"] == "finished");
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(done, "{:#?}", team.monitor.snapshot(StateKind::Task));

    let requests = stub.requests();
    let summaries: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| system(r).starts_with("Summarize your earlier work"))
        .collect();
    let worker_prompts: Vec<&str> = requests
        .iter()
        .filter(|r| !system(r).starts_with("Summarize"))
        .filter_map(|r| r.prompt())
        .filter(|p| field(p, "agent_id") == "w" || p.contains("- executor: think"))
        .collect();
    assert!(!summaries.is_empty(), "no summary was asked for");
    // Redone only every few left-out steps: far fewer summaries than steps.
    assert!(
        summaries.len() <= 3,
        "{} summaries for {THINKS} notes",
        summaries.len()
    );
    let first = summaries[0].prompt().unwrap();
    assert!(
        first.contains("Steps to fold into it") && first.contains("Note 0"),
        "{first}"
    );
    let shown = worker_prompts
        .iter()
        .filter(|p| p.contains("SUMMARY-OF-OLDER-NOTES"))
        .count();
    assert!(shown > 0, "no later prompt showed the summary");
    // The stage is over: its summary went with it.
    let w = team.monitor.get(StateKind::Agent, "w").unwrap();
    assert!(
        w.get("history_summaries")
            .is_none_or(|s| s == &serde_json::json!([])),
        "{w:#}"
    );
    team.shutdown().await;
}
