//! A stub model that answers like a competent one, for tests that drive a whole team over an
//! OpenAI-compatible stub: the manager's decision on a goal and task_manager step on each notice
//! (task created, stage complete, task to judge, agent stuck), or its process_message → decision
//! → task_manager path, and a worker that plans, thinks, reflects and sums up. It reads the skill
//! from the answer schema's name; on the long path it carries what to do through the manager's
//! own steps as an `ACTION …` line.
#![allow(dead_code)]

use super::openai_stub::RecordedRequest;
use serde_json::{Value, json};

/// The text between `start` and `end` in `text`.
pub fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let len = text[from..].find(end)?;
    Some(text[from..from + len].trim())
}

/// The current step's section of a user prompt (history and memory follow it, and may quote
/// earlier notices).
pub fn current_step(user: &str) -> &str {
    match user[1..].find("\n# ") {
        Some(end) => &user[..end + 1],
        None => user,
    }
}

/// What a competent model answers: constrained JSON for the skill the schema names, or the
/// tag a free-text skill (think, summary) asks for. The manager carries what to do through its
/// own steps as an `ACTION …` line.
pub fn competent(req: &RecordedRequest) -> String {
    let user = current_step(req.prompt().unwrap_or_default());
    match req.body["response_format"]["json_schema"]["name"].as_str() {
        Some(skill) => constrained(skill, user).to_string(),
        None if user.contains("<think>") => "<think>A draft.</think>".into(),
        None if user.contains("<completion_summary>") => {
            "<completion_summary>Wrote it.</completion_summary>".into()
        }
        // The summary of older history an agent's prompt folds in (plain text).
        None if user.contains("Steps to fold into it") => "Earlier: tasks were added.".into(),
        None => panic!("the stub has no answer for {user}"),
    }
}

fn constrained(skill: &str, user: &str) -> Value {
    let action = |a: String| json!({"text": "Noted.", "react_action": {"step_intention": "act", "text_content": a}});
    match skill {
        "process_message" => match notice_action(user) {
            Some(a) => action(a),
            None => json!({"text": "Nothing to do."}),
        },
        "decision" => {
            let a = notice_action(user)
                .or_else(|| between(user, "ACTION", "\n").map(|a| format!("ACTION {a}")));
            match a {
                Some(a) => json!({"planned_step": [{"step_intention": "act", "type": "skill",
                    "executor": "task_manager", "text_content": a}]}),
                None => json!({"planned_step": []}),
            }
        }
        "task_manager" => {
            // Straight from the notice, or from the ACTION a decision step carried.
            let a = notice_action(user)
                .or_else(|| between(user, "ACTION", "\n").map(|a| format!("ACTION {a}")))
                .unwrap_or_default();
            let a = a.trim_start_matches("ACTION ");
            let words: Vec<&str> = a.split_whitespace().collect();
            let instruction = match words.as_slice() {
                ["add_task", goal] => json!({"action": "add_task", "task_name": goal,
                    "task_intention": format!("reach {goal}")}),
                ["add_stage", task, worker] => {
                    json!({"action": "add_stage", "task_id": task, "stages": [
                    {"stage_intention": "do it", "agent_allocation": {*worker: "do it"}}]})
                }
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
        "reflection" => json!({"planned_step": []}),
        other => panic!("the stub has no answer for skill `{other}`"),
    }
}

/// What a notice or goal in the current step asks the manager to do, as an `ACTION …` line.
fn notice_action(user: &str) -> Option<String> {
    if let Some(task) = between(user, "task_id: ", "\n") {
        if user.contains("was created with you as its manager") {
            // The first agent of the team listed that is not the manager does the work.
            let team = user.split("Agents of the team:").nth(1).unwrap_or_default();
            let worker = team
                .split("\n- `")
                .skip(1)
                .filter_map(|l| l.split('`').next())
                .find(|id| *id != "manager")
                .unwrap_or("writer");
            return Some(format!("ACTION add_stage {task} {worker}"));
        }
    }
    if let (Some(stage), Some(task)) = (
        between(user, "Every agent of stage ", " of task "),
        between(user, " of task ", " has submitted"),
    ) {
        return Some(format!("ACTION finish_stage {task} {stage}"));
    }
    if let (Some(stage), Some(task)) = (
        between(user, "cannot go on in stage ", " of task "),
        between(user, "cannot go on in stage ", ":").and_then(|s| s.split(" of task ").nth(1)),
    ) {
        // A stuck writer: the stage is accepted as it is.
        return Some(format!("ACTION finish_stage {task} {stage}"));
    }
    if let Some(task) = between(user, "[TaskState] Task ", " has no stage left") {
        return Some(format!("ACTION finish_task {task}"));
    }
    between(user, "GOAL<", ">").map(|goal| format!("ACTION add_task {goal}"))
}
