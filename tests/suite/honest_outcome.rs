//! Honest outcomes, as a user runs them (`cohort run`, its exit code and closing line): the
//! 0.5B run of the issue, scripted. A writer whose thought and summary only hand back its goal
//! produces nothing, so its steps fail after their re-asks instead of finishing with the echo;
//! its manager declares the task finished anyway, with the goal as the summary: refused with
//! the reason, and given again, the task ends failed saying why; `cohort run` exits 1 with
//! `task failed: …`. The same team with real answers finishes as before.

use crate::support::scratch;
use crate::support::states;

use scratch::Scratch;
use serde_json::Value;
use states::*;
use std::path::PathBuf;
use std::process::Command;

const GOAL: &str = "Write a haiku about autumn rain";

/// The team, its writer thinking and summarising `think` and `summary`: its folder's guard and
/// its file.
fn team(tag: &str, think: &str, summary: &str) -> (Scratch, PathBuf) {
    let script = format!(
        r#"replies:
  manager:
    task_manager:
      - when: "GOAL#"
        text: '<task_instruction>{{"action": "add_task", "task_name": "Haiku", "task_intention": "{GOAL}"}}</task_instruction>'
      - when: "was created with you as its manager"
        text: '<task_instruction>{{"action": "add_stage", "task_id": "{{{{task_id}}}}", "stages": [{{"stage_intention": "Write it", "agent_allocation": {{"writer": "{GOAL}"}}}}]}}</task_instruction>'
      - when: "has submitted its completion summary"
        text: '<task_instruction>{{"action": "finish_stage", "task_id": "{{{{task_id}}}}", "stage_id": "{{{{stage_id}}}}"}}</task_instruction>'
      - when: "cannot go on"
        text: '<task_instruction>{{"action": "finish_task", "task_id": "{{{{task_id}}}}", "outcome": "finished", "task_summary": "{GOAL}"}}</task_instruction>'
      - when: "has no stage left to run"
        text: '<task_instruction>{{"action": "finish_task", "task_id": "{{{{task_id}}}}", "outcome": "finished", "task_summary": "The haiku: {summary}"}}</task_instruction>'
  writer:
    planning:
      - when: "{GOAL}"
        text: '<planned_step>[{{"step_intention": "Write the haiku", "type": "skill", "executor": "think", "text_content": "{GOAL}"}}]</planned_step>'
    reflection:
      - when: "every planned step has run"
        text: '<planned_step>[{{"step_intention": "Report it", "type": "skill", "executor": "summary", "text_content": "REPORT#"}}]</planned_step>'
    think:
      - when: "Write the haiku"
        text: '<think>{think}</think>'
    summary:
      - when: "REPORT#"
        text: '<completion_summary>{summary}</completion_summary>'
"#
    );
    team_file(tag, &script, &["writer"])
}

/// A team of a manager and `workers` (each planning, reflecting, thinking and summarising)
/// answering from `script`, written to a fresh folder named after `tag`: the folder's guard
/// (it removes the folder when dropped) and the team file.
fn team_file(tag: &str, script: &str, workers: &[&str]) -> (Scratch, PathBuf) {
    let dir = Scratch::new(&format!("honest-{tag}"));
    std::fs::write(dir.join("script.yaml"), script).unwrap();
    let mut team = "name: honest\nlanguage: en\nllm:\n  provider: scripted\n  script: script.yaml\n\
         agents:\n\
         \x20 - {id: manager, name: M, role: manager, profile: p, skills: [process_message, decision, task_manager]}\n"
        .to_owned();
    for w in workers {
        team += &format!(
            "  - {{id: {w}, name: {w}, role: {w}, profile: p, skills: [planning, reflection, summary, think]}}\n"
        );
    }
    let f = dir.join("team.yaml");
    std::fs::write(&f, team).unwrap();
    (dir, f)
}

/// `cohort run` of the goal on `team`, its store beside the team file (`team.db`).
fn run(team: &PathBuf) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["run", "--json", "--timeout", "60", "--data"])
        .arg(team.with_file_name("team.db"))
        .arg("--goal")
        .arg(format!("GOAL# {GOAL}"))
        .arg("--team")
        .arg(team)
        .output()
        .unwrap();
    let states = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), states, stderr)
}

#[test]
fn a_team_that_echoes_its_goal_and_declares_success_anyway_ends_failed_saying_why() {
    let (dir, file) = team("echo", GOAL, GOAL);
    let (code, s, stderr) = run(&file);
    let closing = stderr.lines().last().unwrap_or_default();
    assert_eq!(code, 1, "{stderr}");
    assert!(closing.starts_with("task failed: "), "{closing}");
    let task = the_task(&s);
    assert_eq!(task["execution_state"], "failed", "{task}");
    assert!(
        task["outcome"]["why"]
            .as_str()
            .is_some_and(|w| w.contains("no stage of the task finished with a result")),
        "{task}"
    );
    // The echo was asked about again and never became the thought's result.
    let think: Vec<&Value> = steps(&s)
        .into_iter()
        .filter(|st| st["agent_id"] == "writer" && st["executor"] == "think")
        .collect();
    assert!(!think.is_empty());
    for st in &think {
        assert_eq!(st["execution_state"], "failed", "{st}");
        assert!(st["execute_result"].get("think").is_none(), "{st}");
        let tried = st["execute_result"]["reasked"].as_array().unwrap();
        assert!(!tried.is_empty(), "{st}");
    }
    assert!(task["repairs"]["echo"].as_u64().unwrap_or(0) >= 1, "{task}");
    // The stored record says why too: `cohort export` carries the reason.
    let data = dir.join("team.db");
    let export = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .arg("export")
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    let ended = String::from_utf8_lossy(&export.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["kind"] == "task" && e["execution_state"] == "failed")
        .expect("the task's end is stored");
    assert!(
        ended["outcome"]["why"]
            .as_str()
            .is_some_and(|w| w.contains("no stage of the task finished with a result")),
        "{ended}"
    );
}

#[test]
fn the_same_team_with_real_answers_finishes() {
    let poem = "Cold rain on the eaves / the maple lets go its red / one leaf at a time";
    let (_dir, file) = team("real", poem, poem);
    let (code, s, stderr) = run(&file);
    assert_eq!(code, 0, "{stderr}");
    let task = the_task(&s);
    assert_eq!(task["execution_state"], "finished", "{task}");
    assert!(task.get("outcome").is_none(), "{task}");
}

#[test]
fn a_task_with_one_failed_and_one_finished_stage_ends_finished_and_says_which_failed() {
    // The writer only hands back its goal and cannot go on; the manager closes its stage
    // anyway, the reviewer's stage gives a real result, and the task finishes on it.
    let script = format!(
        r#"replies:
  manager:
    task_manager:
      - when: "GOAL#"
        text: '<task_instruction>{{"action": "add_task", "task_name": "Haiku", "task_intention": "{GOAL}"}}</task_instruction>'
      - when: "was created with you as its manager"
        text: '<task_instruction>{{"action": "add_stage", "task_id": "{{{{task_id}}}}", "stages": [{{"stage_intention": "Write it", "agent_allocation": {{"writer": "{GOAL}"}}}}, {{"stage_intention": "Review it", "agent_allocation": {{"reviewer": "Write your own haiku about rain"}}}}]}}</task_instruction>'
      - when: "cannot go on"
        text: '<task_instruction>{{"action": "finish_stage", "task_id": "{{{{task_id}}}}", "stage_id": "{{{{stage_id}}}}"}}</task_instruction>'
      - when: "has submitted its completion summary"
        text: '<task_instruction>{{"action": "finish_stage", "task_id": "{{{{task_id}}}}", "stage_id": "{{{{stage_id}}}}"}}</task_instruction>'
      - when: "has no stage left to run"
        text: '<task_instruction>{{"action": "finish_task", "task_id": "{{{{task_id}}}}", "outcome": "finished", "task_summary": "The reviewer wrote it: Cold rain on the eaves"}}</task_instruction>'
  writer:
    planning:
      - when: "{GOAL}"
        text: '<planned_step>[{{"step_intention": "Write the haiku", "type": "skill", "executor": "think", "text_content": "{GOAL}"}}]</planned_step>'
    reflection:
      - when: "every planned step has run"
        text: '<planned_step>[]</planned_step>'
    think:
      - when: "Write the haiku"
        text: '<think>{GOAL}</think>'
  reviewer:
    planning:
      - when: "Write your own haiku"
        text: '<planned_step>[{{"step_intention": "Write a haiku", "type": "skill", "executor": "think", "text_content": "POEM#"}}]</planned_step>'
    reflection:
      - when: "every planned step has run"
        text: '<planned_step>[{{"step_intention": "Report it", "type": "skill", "executor": "summary", "text_content": "REPORT#"}}]</planned_step>'
    think:
      - when: "POEM#"
        text: '<think>Cold rain on the eaves / the maple lets go its red / one leaf at a time</think>'
    summary:
      - when: "REPORT#"
        text: '<completion_summary>Cold rain on the eaves / the maple lets go its red / one leaf at a time</completion_summary>'
"#
    );
    let (_dir, file) = team_file("mixed", &script, &["writer", "reviewer"]);
    let (code, s, stderr) = run(&file);
    let closing = stderr.lines().last().unwrap_or_default();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        closing.contains("with stages that failed: stage \"Write it\" failed"),
        "{closing}"
    );
    let task = the_task(&s);
    assert_eq!(task["execution_state"], "finished", "{task}");
    let failed = task["outcome"]["failed_stages"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{task}");
    assert_eq!(failed[0]["stage_intention"], "Write it");
    assert!(
        failed[0]["why"].as_str().unwrap().contains("writer failed"),
        "{task}"
    );
    assert_eq!(task["outcome"].get("why"), None, "{task}");
}
