//! The `fan_out` scenario: a graph plan of four independent think steps and a join after all
//! four, each think answer taking `delay_ms` (scripted), run from the goal to the finished task
//! at a given `step_limits.parallel_steps`; the parent compares the wall time with the plan's
//! critical path and with `parallel_steps: 1`.
//!
//! The team is tests/suite/plan_graph.rs's: a manager that opens one task with one stage for the
//! writer, and a writer whose planning answers the graph, whose reflection plans the summary.
//! Only the five think answers wait; every other answer is instant.

use super::scenarios::Figures;
use super::team::Scratch;
use super::{BenchOptions, Job, Row, f, in_child, row};
use crate::actors::{Host, Team, start_team};
use crate::config::load_team;
use crate::monitor::StateKind;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The parts that run side by side.
const PARTS: [&str; 4] = ["a", "b", "c", "d"];

/// The manager: the goal opens a task, the task one stage for the writer, the writer's summary
/// finishes the stage, the empty task is finished.
const MANAGER: &str = r#"
  manager:
    task_manager:
      - when: "GOAL#"
        text: '<task_instruction>{"action": "add_task", "task_name": "Graph", "task_intention": "Run the plan."}</task_instruction>'
      - when: "was created with you as its manager"
        text: '<task_instruction>{"action": "add_stage", "task_id": "{{task_id}}", "stages": [{"stage_intention": "Write", "agent_allocation": {"writer": "WORK# the parts"}}]}</task_instruction>'
      - when: "has submitted its completion summary"
        text: '<task_instruction>{"action": "finish_stage", "task_id": "{{task_id}}", "stage_id": "{{stage_id}}"}</task_instruction>'
      - when: "cannot go on"
        text: '<task_instruction>{"action": "finish_stage", "task_id": "{{task_id}}", "stage_id": "{{stage_id}}"}</task_instruction>'
      - when: "has no stage left to run"
        text: '<task_instruction>{"action": "finish_task", "task_id": "{{task_id}}", "task_summary": "Done."}</task_instruction>'
"#;

/// The writer's closing: its reflection plans the summary, which it writes.
const CLOSING: &str = r#"
    reflection:
      - when: "every planned step has run"
        text: '<planned_step>[{"step_intention": "Report", "type": "skill", "executor": "summary", "text_content": "SUMMARY#"}]</planned_step>'
    summary:
      - when: "SUMMARY#"
        text: '<completion_summary>Wrote the parts and joined them.</completion_summary>'
"#;

/// The plan: (id, depends_on) of each step, each a think step whose answer waits `delay_ms`.
fn plan() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut plan: Vec<_> = PARTS.iter().map(|p| (*p, Vec::new())).collect();
    plan.push(("join", PARTS.to_vec()));
    plan
}

/// The longest chain of waits through the plan (each step `delay_ms`): what no number of
/// parallel steps can beat.
pub fn critical_delay_ms(delay_ms: u64) -> u64 {
    let plan = plan();
    let mut done: Vec<(&str, u64)> = Vec::new();
    // The plan lists every step after those it depends on.
    for (id, deps) in &plan {
        let before = deps
            .iter()
            .filter_map(|d| done.iter().find(|(i, _)| i == d).map(|(_, t)| *t))
            .max()
            .unwrap_or(0);
        done.push((id, before + delay_ms));
    }
    done.iter().map(|(_, t)| *t).max().unwrap_or(0)
}

/// The writer's script: the graph plan, then a think answer a step waiting `delay_ms`.
fn writer(delay_ms: u64) -> String {
    let steps: Vec<String> = plan()
        .iter()
        .map(|(id, deps)| {
            let deps: Vec<String> = deps.iter().map(|d| format!("\"{d}\"")).collect();
            format!(
                r#"{{"id": "{id}", "depends_on": [{}], "step_intention": "Step {id}", "type": "skill", "executor": "think", "text_content": "PART-{id}"}}"#,
                deps.join(", ")
            )
        })
        .collect();
    let mut s = format!(
        "    planning:\n      - when: \"WORK#\"\n        text: '<planned_step>{{\"steps\": [{}]}}</planned_step>'\n    think:\n",
        steps.join(", ")
    );
    for (id, _) in plan() {
        s.push_str(&format!(
            "      - {{when: \"PART-{id}\", delay_ms: {delay_ms}, text: '<think>result of {id}</think>'}}\n"
        ));
    }
    s
}

/// Writes the team (with `parallel_steps`) and its script into `dir`; the team file.
fn write_team(dir: &Path, parallel_steps: usize, delay_ms: u64) -> std::io::Result<()> {
    let script = format!("replies:{MANAGER}  writer:\n{}{CLOSING}", writer(delay_ms));
    std::fs::write(dir.join("script.yaml"), script)?;
    std::fs::write(
        dir.join("team.yaml"),
        format!(
            "name: fan-out\nlanguage: en\nstep_limits: {{parallel_steps: {parallel_steps}}}\n\
             llm:\n  provider: scripted\n  script: script.yaml\n\
             agents:\n\
             \x20 - {{id: manager, name: M, role: manager, profile: p, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: writer, name: W, role: writer, profile: p, skills: [planning, reflection, summary, think]}}\n"
        ),
    )
}

/// Waits (`limit` at most) until the task named `name` ends; an error unless it finished.
pub(super) async fn until_finished(team: &Team, name: &str, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let ended = team.monitor.read(|s| {
            s.tasks
                .values()
                .find(|t| t.task_name == name && t.execution_state.is_over())
                .map(|t| t.execution_state)
        });
        match ended {
            Some(crate::state::ExecutionState::Finished) => return Ok(()),
            Some(other) => return Err(format!("the task `{name}` ended {other:?}")),
            None if Instant::now() > deadline => {
                return Err(format!("the task `{name}` did not end within {limit:?}"));
            }
            None => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
}

/// The most of `steps` (started_at, ended_at in ms) that ran at one moment.
pub(super) fn most_at_once(steps: &[(i64, i64)]) -> usize {
    steps
        .iter()
        .map(|(start, _)| {
            steps
                .iter()
                .filter(|(s, e)| s <= start && start < e)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// (started_at, ended_at) of the writer's think steps.
fn think_times(team: &Team) -> Vec<(i64, i64)> {
    team.monitor
        .snapshot(StateKind::Step)
        .values()
        .filter(|s| s["agent_id"] == "writer" && s["executor"] == "think")
        .filter_map(|s| Some((s["started_at"].as_i64()?, s["ended_at"].as_i64()?)))
        .collect()
}

/// `runs` runs of the fan-out plan at `parallel_steps`, a fresh team each: the wall time from
/// the goal to the finished task of each, and the most think steps that ran at once.
pub fn fan_out(runs: usize, parallel_steps: usize, delay_ms: u64) -> Figures {
    let scratch =
        Scratch::new(&format!("fan-out-{parallel_steps}-{delay_ms}")).map_err(|e| e.to_string())?;
    write_team(&scratch.0, parallel_steps, delay_ms).map_err(|e| e.to_string())?;
    let cfg = load_team(&scratch.0.join("team.yaml")).map_err(|e| e.to_string())?;
    let vars = |_: &str| None;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let host = Host::new(&vars, exe);
    let system = actix::System::new();
    system.block_on(async {
        let (mut ms, mut at_once) = (Vec::new(), 0);
        for _ in 0..runs {
            let team = start_team(&cfg, &host).map_err(|e| e.to_string())?;
            let started = Instant::now();
            team.submit_goal(None, "GOAL# run the plan")
                .await
                .map_err(|e| e.to_string())?;
            until_finished(&team, "Graph", Duration::from_secs(60)).await?;
            ms.push(started.elapsed().as_secs_f64() * 1000.0);
            at_once = at_once.max(most_at_once(&think_times(&team)));
            team.shutdown().await;
        }
        Ok(json!({
            "parallel_steps": parallel_steps, "delay_ms": delay_ms, "runs_ms": ms,
            "median_ms": median(&ms), "most_at_once": at_once,
        }))
    })
}

pub(super) fn median(xs: &[f64]) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// The three runs (parallel, one at a time, instant), each in its child; rows into `out`.
pub(super) fn rows<N>(exe: &Path, opts: &BenchOptions, note: &mut N, out: &mut Vec<Row>)
where
    N: FnMut(&str, Result<Value, String>) -> Option<Value>,
{
    let runs = if opts.quick { 1 } else { 5 };
    let delay_ms = 400;
    let mut run = |parallel_steps, delay_ms| {
        eprintln!(
            "bench: the fan-out plan, {delay_ms} ms a think answer, parallel_steps {parallel_steps}, {runs} run(s) …"
        );
        let job = Job::FanOut {
            runs,
            parallel_steps,
            delay_ms,
        };
        note("fan_out", in_child(exe, &job))
    };
    let (Some(par), Some(seq), Some(instant)) = (run(4, delay_ms), run(1, delay_ms), run(4, 0))
    else {
        return;
    };
    figure_rows(&par, &seq, &instant, runs, delay_ms, out);
}

/// The table's lines from the three runs' answers.
fn figure_rows(
    par: &Value,
    seq: &Value,
    instant: &Value,
    runs: usize,
    delay_ms: u64,
    out: &mut Vec<Row>,
) {
    let (p, s, i) = (
        f(&par["median_ms"]),
        f(&seq["median_ms"]),
        f(&instant["median_ms"]),
    );
    let chain = critical_delay_ms(delay_ms) as f64;
    let critical = chain + i;
    let sum_of_waits = (delay_ms * plan().len() as u64) as f64;
    let wall = |v: &Value, n| {
        format!(
            "4 parts side by side, then a join; {delay_ms} ms a think answer; parallel_steps {n}: goal → task finished, median of {runs} (most think steps at once: {})",
            v["most_at_once"]
        )
    };
    let ms = |x: f64| format!("{:.0} ms", x);
    out.push(row("fan_out", wall(par, 4), ms(p), ""));
    out.push(row("fan_out", wall(seq, 1), ms(s), ""));
    out.push(row(
        "fan_out",
        format!(
            "critical path: the longest chain of waits (a part, then the join: {chain:.0} ms) + the same run with instant answers ({i:.0} ms)"
        ),
        ms(critical),
        "",
    ));
    out.push(row(
        "fan_out",
        "parallel_steps 4: wall time / critical path",
        format!("{:.2}×", p / critical),
        "≤ 1.3×",
    ));
    out.push(row(
        "fan_out",
        "wall time parallel_steps 4 / parallel_steps 1",
        format!("{:.2}×", p / s),
        &format!(
            "≈ {:.2}× (critical path / all waits + instant)",
            critical / (sum_of_waits + i)
        ),
    ));
}
