//! 20 goals against an OpenAI-compatible endpoint that answers like a competent model but
//! breaks one call in five: 500s, 429s, hangs past the timeout, truncated bodies, empty
//! choices, answers without their tag or JSON, answers cut off at the token limit. Every goal
//! must still end as a finished task: HTTP faults are retried by the provider, unusable answers
//! are asked again, and nothing stalls.

#[path = "support/openai_stub.rs"]
mod openai_stub;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use openai_stub::{OpenAiStub, RecordedRequest, StubResponse};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const GOALS: usize = 20;

fn team_file(base_url: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cohort-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("team.yaml");
    std::fs::write(
        &f,
        format!(
            "llm: {{provider: openai, base_url: '{base_url}', model: flaky, timeout_secs: 1, max_retries: 3}}\n\
             agents:\n\
             \x20 - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: writer, role: writer, skills: [planning, think, reflection, summary, process_message, decision]}}\n"
        ),
    )
    .unwrap();
    f
}

/// The text between `start` and `end` in `text`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let len = text[from..].find(end)?;
    Some(text[from..from + len].trim())
}

/// The current step's section of a user prompt (history and memory follow it, and may quote
/// earlier notices).
fn current_step(user: &str) -> &str {
    match user[1..].find("\n# ") {
        Some(end) => &user[..end + 1],
        None => user,
    }
}

/// What a competent model answers (as constrained JSON), from the skill the schema names and
/// the step's text. The manager carries what to do through its own steps as an `ACTION …` line.
fn competent(req: &RecordedRequest) -> Value {
    let skill = req.body["response_format"]["json_schema"]["name"]
        .as_str()
        .unwrap_or_default();
    let user = current_step(req.prompt().unwrap_or_default());
    let action = |a: String| json!({"text": "Noted.", "react_action": {"step_intention": "act", "text_content": a}});
    match skill {
        "process_message" => {
            if let Some(task) = between(user, "task_id: ", "\n") {
                if user.contains("was created with you as its manager") {
                    return action(format!("ACTION add_stage {task}"));
                }
            }
            if let (Some(stage), Some(task)) = (
                between(user, "Every agent of stage ", " of task "),
                between(user, " of task ", " has submitted"),
            ) {
                return action(format!("ACTION finish_stage {task} {stage}"));
            }
            if let (Some(stage), Some(task)) = (
                between(user, "cannot go on in stage ", " of task "),
                between(user, "cannot go on in stage ", ":")
                    .and_then(|s| s.split(" of task ").nth(1)),
            ) {
                // A stuck writer: the stage is accepted as it is.
                return action(format!("ACTION finish_stage {task} {stage}"));
            }
            if let Some(task) = between(user, "[TaskState] Task ", " has no stage left") {
                return action(format!("ACTION finish_task {task}"));
            }
            if let Some(goal) = between(user, "GOAL<", ">") {
                return action(format!("ACTION add_task {goal}"));
            }
            json!({"text": "Nothing to do."})
        }
        "decision" => match between(user, "ACTION", "\n") {
            Some(a) => json!({"planned_step": [{"step_intention": "act", "type": "skill",
                "executor": "task_manager", "text_content": format!("ACTION {a}")}]}),
            None => json!({"planned_step": []}),
        },
        "task_manager" => {
            let a = between(user, "ACTION", "\n").unwrap_or_default();
            let words: Vec<&str> = a.split_whitespace().collect();
            let instruction = match words.as_slice() {
                ["add_task", goal] => json!({"action": "add_task", "task_name": goal,
                    "task_intention": format!("reach {goal}")}),
                ["add_stage", task] => json!({"action": "add_stage", "task_id": task, "stages": [
                    {"stage_intention": "write it", "agent_allocation": {"writer": "write it"}}]}),
                ["finish_stage", task, stage] => {
                    json!({"action": "finish_stage", "task_id": task, "stage_id": stage})
                }
                ["finish_task", task] => json!({"action": "finish_task", "task_id": task,
                    "task_summary": "done", "outcome": "finished"}),
                other => panic!("the stub lost its action: {other:?} in {user}"),
            };
            json!({"task_instruction": instruction})
        }
        "planning" => json!({"planned_step": [
            {"step_intention": "draft", "type": "skill", "executor": "think", "text_content": "draft it"},
            {"step_intention": "check", "type": "skill", "executor": "reflection", "text_content": "done?"}]}),
        "think" => json!({"think": "A draft."}),
        "reflection" => json!({"planned_step": []}),
        "summary" => json!({"completion_summary": "Wrote it."}),
        other => panic!("the stub has no answer for skill `{other}`"),
    }
}

/// One call in five is broken, in turn by each kind of fault (deterministic: the n-th call).
fn flaky(n: u64, req: &RecordedRequest) -> StubResponse {
    let answer = competent(req).to_string();
    if n % 5 != 4 {
        return StubResponse::reply_with_usage(&answer, 100, 20);
    }
    match (n / 5) % 7 {
        0 => StubResponse::error(500, "upstream crashed"),
        1 => StubResponse::rate_limited(Some(0)),
        // Longer than the 1 s timeout.
        2 => StubResponse::reply(&answer).with_delay(Duration::from_millis(1500)),
        3 => {
            let body = StubResponse::reply(&answer).body;
            StubResponse::raw(200, body[..body.len() / 2].to_owned())
        }
        4 => StubResponse::raw(
            200,
            r#"{"id": "x", "object": "chat.completion", "choices": []}"#,
        ),
        5 => StubResponse::reply("Sure, I will get right on it."),
        _ => StubResponse::cut_off(&answer[..answer.len() / 2]),
    }
}

#[actix::test]
async fn twenty_goals_finish_though_one_call_in_five_fails() {
    let stub = OpenAiStub::start().await;
    let calls = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&calls);
    stub.set_fallback(move |req| flaky(counter.fetch_add(1, Ordering::Relaxed), req));
    let cfg = load_team(&team_file(&stub.base_url())).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();

    for n in 0..GOALS {
        team.submit_goal(None, &format!("Please reach GOAL<g{n}>."))
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let finished = loop {
        let tasks = team.monitor.snapshot(StateKind::Task);
        let done: Vec<&Value> = tasks
            .values()
            .filter(|t| t["task_name"] != "MAS base task" && t["execution_state"] == "finished")
            .collect();
        if done.len() >= GOALS || Instant::now() > deadline {
            break done
                .iter()
                .map(|t| t["task_name"].to_string())
                .collect::<Vec<_>>();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let steps = team.monitor.snapshot(StateKind::Step);
    let failed = steps
        .values()
        .filter(|s| s["execution_state"] == "failed")
        .count();
    let reasked: usize = steps
        .values()
        .filter_map(|s| s["execute_result"]["reasked"].as_array())
        .map(Vec::len)
        .sum();
    eprintln!(
        "{} calls, {} finished tasks, {failed} failed steps, {reasked} answers asked again",
        calls.load(Ordering::Relaxed),
        finished.len()
    );
    if finished.len() < GOALS {
        let tasks = team.monitor.snapshot(StateKind::Task);
        for t in tasks
            .values()
            .filter(|t| t["execution_state"] != "finished")
        {
            eprintln!(
                "open task {} {} stages {}",
                t["task_name"], t["execution_state"], t["stage_list"]
            );
        }
        for a in team.monitor.snapshot(StateKind::Agent).values() {
            eprintln!(
                "agent {} {} lock {} steps {}",
                a["agent_id"], a["working_state"], a["step_lock"], a["agent_step"]
            );
        }
        let mut open: Vec<_> = steps
            .values()
            .filter(|s| s["execution_state"] != "finished")
            .collect();
        open.sort_by_key(|s| s["executor"].to_string());
        for s in open {
            eprintln!(
                "step {} {} {} {}",
                s["agent_id"], s["executor"], s["execution_state"], s["text_content"]
            );
        }
    }
    assert_eq!(finished.len(), GOALS, "finished: {finished:?}");
    let mut names = finished.clone();
    names.sort();
    names.dedup();
    assert_eq!(
        names.len(),
        GOALS,
        "each goal became one task: {finished:?}"
    );
    assert!(reasked > 0, "the broken answers were asked again");
}
