//! The fan-out plan (seeds 001–003, issue "plans as graphs"): a writer plans `parts`
//! independent think steps and a join that depends on all of them, every LLM answer taking
//! `delay_ms` (scripted). Measured from the goal to the finished task, against the critical
//! path the graph allows: the manager's four calls (add_task, add_stage, finish_stage,
//! finish_task), the planning, one level of parts side by side, the join, the reflection and the
//! summary, nine answers in a row.

use super::scenarios::{Figures, rss_mib};
use super::team::Scratch;
use crate::actors::Host;
use crate::config::load_team;
use crate::run::{RunOptions, run_goal};
use serde_json::json;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// LLM answers on the longest dependency chain of the scenario (see the module doc).
pub const CRITICAL_ANSWERS: u64 = 9;

/// The scenario's script: rules only, each answer `delay_ms` late.
fn script(parts: usize, delay_ms: u64) -> String {
    let rule = |when: &str, text: &str| {
        format!("      - {{when: \"{when}\", delay_ms: {delay_ms}, text: '{text}'}}\n")
    };
    let mut s = String::from("replies:\n  manager:\n    task_manager:\n");
    for (when, action) in [
        ("GOAL#", r#"{"action": "add_task", "task_name": "Fan", "task_intention": "Write the parts and join them."}"#),
        ("was created with you as its manager", r#"{"action": "add_stage", "task_id": "{{task_id}}", "stages": [{"stage_intention": "Write", "agent_allocation": {"writer": "WORK# the parts"}}]}"#),
        ("has submitted its completion summary", r#"{"action": "finish_stage", "task_id": "{{task_id}}", "stage_id": "{{stage_id}}"}"#),
        ("has no stage left to run", r#"{"action": "finish_task", "task_id": "{{task_id}}", "task_summary": "The parts, joined."}"#),
    ] {
        s.push_str(&rule(when, &format!("<task_instruction>{action}</task_instruction>")));
    }
    let ids: Vec<String> = (0..parts).map(|i| format!("p{i}")).collect();
    let mut steps: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(r#"{{"id": "{id}", "step_intention": "Part {id}", "type": "skill", "executor": "think", "text_content": "PART-{id}"}}"#)
        })
        .collect();
    let deps: Vec<String> = ids.iter().map(|id| format!("\"{id}\"")).collect();
    steps.push(format!(
        r#"{{"id": "join", "depends_on": [{}], "step_intention": "Join", "type": "skill", "executor": "think", "text_content": "JOIN#"}}"#,
        deps.join(", ")
    ));
    s.push_str("  writer:\n    planning:\n");
    let plan = format!("<planned_step>{{\"steps\": [{}]}}</planned_step>", steps.join(", "));
    s.push_str(&rule("WORK#", &plan));
    s.push_str("    think:\n");
    for id in &ids {
        s.push_str(&rule(&format!("PART-{id}"), &format!("<think>part {id} written</think>")));
    }
    s.push_str(&rule("JOIN#", "<think>the parts, joined</think>"));
    s.push_str("    reflection:\n");
    let summary = r#"<planned_step>[{"step_intention": "Report", "type": "skill", "executor": "summary", "text_content": "SUMMARY#"}]</planned_step>"#;
    s.push_str(&rule("every planned step has run", summary));
    s.push_str("    summary:\n");
    s.push_str(&rule("SUMMARY#", "<completion_summary>Wrote the parts and joined them.</completion_summary>"));
    s
}

/// One run of the fan-out plan with `parallel_steps`: wall time, and the critical path.
pub fn fan_out(parts: usize, delay_ms: u64, parallel_steps: usize) -> Figures {
    let scratch = Scratch::new(&format!("fan-out-{parallel_steps}")).map_err(|e| e.to_string())?;
    std::fs::write(scratch.0.join("script.yaml"), script(parts, delay_ms))
        .map_err(|e| e.to_string())?;
    let mut team = String::from("name: fan-out\nlanguage: en\n");
    let _ = writeln!(team, "step_limits: {{parallel_steps: {parallel_steps}}}");
    team.push_str(
        "llm:\n  provider: scripted\n  script: script.yaml\nagents:\n\
         \x20 - {id: manager, name: M, role: manager, profile: p, skills: [process_message, decision, task_manager]}\n\
         \x20 - {id: writer, name: W, role: writer, profile: p, skills: [planning, reflection, summary, think]}\n",
    );
    let file = scratch.0.join("team.yaml");
    std::fs::write(&file, team).map_err(|e| e.to_string())?;
    let cfg = load_team(&file).map_err(|e| e.to_string())?;
    let opts = RunOptions {
        timeout: Duration::from_secs(300),
        ..RunOptions::default()
    };
    let vars = |_: &str| None;
    let host = Host::new(&vars, std::env::current_exe().unwrap_or_else(|_| "cohort".into()));
    let system = actix::System::new();
    let started = Instant::now();
    let report = system
        .block_on(async { run_goal(&cfg, "GOAL# fan out", &opts, &host, |_| {}).await })
        .map_err(|e| e.to_string())?;
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    let critical_ms = (CRITICAL_ANSWERS * delay_ms) as f64;
    Ok(json!({
        "parts": parts,
        "parallel_steps": parallel_steps,
        "wall_ms": wall_ms,
        "critical_ms": critical_ms,
        "steps": report.steps_run,
        "outcome": format!("{:?}", report.outcome),
        "peak_rss_mib": rss_mib().0,
    }))
}
