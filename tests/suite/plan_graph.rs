//! Plans as graphs, end to end on a scripted team: a writer's four independent steps run side
//! by side and their join starts only after the last of them, with their results in its
//! prompt; a plan with a cycle is refused with the circle and the corrected one runs; a replan
//! after step `a` replaces the plan's unstarted steps and keeps what finished.

use crate::support::scratch;

use cohort::actors::{Host, Team, start_team};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use scratch::Scratch;
use serde_json::Value;
use std::time::{Duration, Instant};

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

fn think(tag: &str, result: &str) -> String {
    format!("      - {{when: \"{tag}\", delay_ms: 400, text: '<think>{result}</think>'}}\n")
}

fn plan_step(id: &str, deps: &[&str], text: &str) -> String {
    let deps: Vec<String> = deps.iter().map(|d| format!("\"{d}\"")).collect();
    format!(
        r#"{{"id": "{id}", "depends_on": [{}], "step_intention": "Step {id}", "type": "skill", "executor": "think", "text_content": "{text}"}}"#,
        deps.join(", ")
    )
}

fn start(tag: &str, writer: &str) -> (Scratch, Team) {
    start_full(tag, writer, "", "")
}

/// The team, with `extra` lines in its team file and `writer_extra` fields on its writer,
/// started from a fresh folder: that folder's guard (keep it while the team runs) and the team.
fn start_full(tag: &str, writer: &str, extra: &str, writer_extra: &str) -> (Scratch, Team) {
    let dir = Scratch::new(&format!("plan-graph-{tag}"));
    let script = format!("replies:{MANAGER}  writer:\n{writer}{CLOSING}");
    std::fs::write(dir.join("script.yaml"), script).unwrap();
    std::fs::write(
        dir.join("team.yaml"),
        format!("name: graph\nlanguage: en\n{extra}llm:\n  provider: scripted\n  script: script.yaml\n\
         agents:\n\
         \x20 - {{id: manager, name: M, role: manager, profile: p, skills: [process_message, decision, task_manager]}}\n\
         \x20 - {{id: writer, name: W, role: writer, profile: p, skills: [planning, reflection, summary, think]{writer_extra}}}\n"),
    )
    .unwrap();
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    (dir, team)
}

/// Gives the goal and waits (60 s at most) for its task to end; its steps by intention.
async fn run(team: &Team) -> Vec<Value> {
    team.submit_goal(None, "GOAL# run the plan").await.unwrap();
    run_started(team).await
}

/// Waits (60 s at most) for the task of a goal already given to end; the writer's steps.
async fn run_started(team: &Team) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tasks = team.monitor.snapshot(StateKind::Task);
        if let Some(t) = tasks.values().find(|t| t["task_name"] == "Graph")
            && (t["execution_state"] == "finished" || t["execution_state"] == "failed")
        {
            assert_eq!(t["execution_state"], "finished", "{t}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the task never ended: {tasks:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    team.monitor
        .snapshot(StateKind::Step)
        .into_values()
        .filter(|s| s["agent_id"] == "writer")
        .collect()
}

fn step<'a>(steps: &'a [Value], intention: &str) -> &'a Value {
    steps
        .iter()
        .find(|s| s["step_intention"] == intention)
        .unwrap_or_else(|| panic!("no step `{intention}` in {steps:#?}"))
}

fn times(s: &Value) -> (i64, i64) {
    (
        s["started_at"].as_i64().unwrap(),
        s["ended_at"].as_i64().unwrap(),
    )
}

/// The fan-out plan: four parts, each its own think step, and a join after all four.
fn fan_out_writer(parts: &[&str]) -> String {
    let mut plan: Vec<String> = parts
        .iter()
        .map(|p| plan_step(p, &[], &format!("PART-{p}")))
        .collect();
    plan.push(plan_step("join", parts, "JOIN#"));
    let mut writer = format!(
        "    planning:\n      - when: \"WORK#\"\n        text: '<planned_step>{{\"steps\": [{}]}}</planned_step>'\n    think:\n",
        plan.join(", ")
    );
    for p in parts {
        writer.push_str(&think(
            &format!("PART-{p}"),
            &format!("result of {p}: {p}{p}{p}"),
        ));
    }
    writer.push_str(&think("JOIN#", "all four joined"));
    writer
}

#[actix::test]
async fn four_independent_steps_run_side_by_side_and_their_join_waits_for_all_of_them() {
    let parts = ["a", "b", "c", "d"];
    let (_dir, team) = start("fan-out", &fan_out_writer(&parts));
    let steps = run(&team).await;

    let ran: Vec<(i64, i64)> = parts
        .iter()
        .map(|p| times(step(&steps, &format!("Step {p}"))))
        .collect();
    let last_start = ran.iter().map(|t| t.0).max().unwrap();
    let first_end = ran.iter().map(|t| t.1).min().unwrap();
    assert!(
        last_start < first_end,
        "the four parts ran side by side (each started before any ended): {ran:?}"
    );
    let join = step(&steps, "Step join");
    assert_eq!(join["execution_state"], "finished");
    let last_end = ran.iter().map(|t| t.1).max().unwrap();
    assert!(
        times(join).0 >= last_end,
        "the join started after the last part ended"
    );
    assert!(
        join["ready_at"].as_i64().is_some_and(|r| r >= last_end),
        "{join}"
    );
    assert_eq!(join["depends_on"].as_array().unwrap().len(), 4);
    // The join's prompt holds the four results.
    let id = join["step_id"].as_str().unwrap().into();
    let calls = team.calls.of_step(&id);
    let prompt = &calls.first().expect("the join's call is kept").prompt;
    for p in parts {
        assert!(
            prompt.contains(&format!("result of {p}: {p}{p}{p}")),
            "{prompt}"
        );
    }
    team.shutdown().await;
}

/// Runs the fan-out plan with `extra` in the team file and asserts each step ran after the one
/// before it.
async fn one_at_a_time(tag: &str, extra: &str, writer_extra: &str) {
    let parts = ["a", "b", "c", "d"];
    let (_dir, team) = start_full(tag, &fan_out_writer(&parts), extra, writer_extra);
    let steps = run(&team).await;
    let mut ran: Vec<(i64, i64)> = parts
        .iter()
        .chain(&["join"])
        .map(|p| times(step(&steps, &format!("Step {p}"))))
        .collect();
    ran.sort();
    for pair in ran.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "each step after the one before: {ran:?}"
        );
    }
    team.shutdown().await;
}

#[actix::test]
async fn with_parallel_steps_1_the_same_plan_runs_one_step_at_a_time() {
    one_at_a_time("team-1", "step_limits: {parallel_steps: 1}\n", "").await;
}

#[actix::test]
async fn an_agents_own_parallel_steps_wins_over_the_teams() {
    one_at_a_time(
        "agent-1",
        "step_limits: {parallel_steps: 8}\n",
        ", parallel_steps: 1",
    )
    .await;
}

#[actix::test]
async fn a_plan_with_a_cycle_is_refused_with_the_circle_and_the_corrected_plan_runs() {
    let cyclic = [
        plan_step("a", &["b"], "PART-a"),
        plan_step("b", &["a"], "PART-b"),
    ];
    let fixed = [
        plan_step("a", &[], "PART-a"),
        plan_step("b", &["a"], "PART-b"),
    ];
    let writer = format!(
        "    planning:\n      - '<planned_step>{{\"steps\": [{}]}}</planned_step>'\n      - '<planned_step>{{\"steps\": [{}]}}</planned_step>'\n    think:\n{}{}",
        cyclic.join(", "),
        fixed.join(", "),
        think("PART-a", "a done"),
        think("PART-b", "b done"),
    );
    let (_dir, team) = start("cycle", &writer);
    let steps = run(&team).await;
    let planning = steps
        .iter()
        .find(|s| s["executor"] == "planning")
        .expect("the writer's plan");
    let tries = planning["execute_result"]["reasked"].as_array().unwrap();
    assert_eq!(tries.len(), 1, "{planning}");
    assert!(
        tries[0]["error"]
            .as_str()
            .unwrap()
            .contains("a → b → a depend on each other in a circle"),
        "{planning}"
    );
    let (a, b) = (step(&steps, "Step a"), step(&steps, "Step b"));
    assert_eq!(
        (&a["execution_state"], &b["execution_state"]),
        (&"finished".into(), &"finished".into())
    );
    assert!(times(b).0 >= times(a).1, "b ran after a");
    team.shutdown().await;
}

#[actix::test]
async fn a_replan_after_a_replaces_the_unstarted_steps_and_keeps_a() {
    let plan = [
        plan_step("a", &[], "PART-a"),
        plan_step("b", &["a"], "PART-b"),
        plan_step("c", &["b"], "PART-c"),
    ];
    let writer = format!(
        "    planning:\n      - when: \"WORK#\"\n        text: '<planned_step>{{\"steps\": [{}], \"replan\": [\"a\"]}}</planned_step>'\n      - when: \"Plan the rest of my plan again\"\n        text: '<planned_step>[{{\"step_intention\": \"Step x\", \"type\": \"skill\", \"executor\": \"think\", \"text_content\": \"PART-x\"}}]</planned_step>'\n    think:\n{}{}{}{}",
        plan.join(", "),
        think("PART-a", "a found that b is not needed"),
        think("PART-b", "b done"),
        think("PART-c", "c done"),
        think("PART-x", "x done"),
    );
    let (_dir, team) = start("replan", &writer);
    let steps = run(&team).await;
    let state = |i: &str| {
        step(&steps, i)["execution_state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(state("Step a"), "finished");
    assert_eq!(state("Step b"), "cancelled");
    assert_eq!(state("Step c"), "cancelled");
    assert_eq!(state("Step x"), "finished");
    let replan = steps
        .iter()
        .find(|s| s["origin"]["kind"] == "replan")
        .unwrap_or_else(|| panic!("a replan step: {steps:#?}"));
    assert_eq!(replan["execution_state"], "finished");
    assert!(
        replan["text_content"]
            .as_str()
            .unwrap()
            .contains("- `b` [think] Step b (after a)"),
        "the replan's text holds the plan: {replan}"
    );
    assert_eq!(
        step(&steps, "Step a")["execute_result"]["think"],
        "a found that b is not needed",
        "a keeps its result"
    );
    team.shutdown().await;
}

/// While the four parts run side by side, a person cancels one: it ends cancelled, the others
/// finish on their own, and the join, which depended on it, is cancelled saying why; the
/// writer's closing reflection then closes its part and the task still ends.
#[actix::test]
async fn cancelling_one_of_the_parts_in_flight_cancels_the_join_and_the_rest_finish() {
    let parts = ["a", "b", "c", "d"];
    let (_dir, team) = start("cancel", &fan_out_writer(&parts));
    team.submit_goal(None, "GOAL# run the plan").await.unwrap();
    let writer = team.agents[&"writer".into()].clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    let running_b = loop {
        let steps = team.monitor.snapshot(StateKind::Step);
        let running: Vec<&Value> = steps
            .values()
            .filter(|s| s["agent_id"] == "writer" && s["execution_state"] == "running")
            .collect();
        if running.len() >= 2
            && let Some(b) = running.iter().find(|s| s["step_intention"] == "Step b")
        {
            break b["step_id"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the parts never ran together: {steps:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    writer
        .send(cohort::actors::CancelStep {
            step_id: running_b.as_str().into(),
            by: "operator".into(),
            reason: "not needed".into(),
        })
        .await
        .unwrap()
        .unwrap();
    let steps = run_started(&team).await;
    let state = |i: &str| {
        step(&steps, i)["execution_state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(state("Step b"), "cancelled");
    for p in ["a", "c", "d"] {
        assert_eq!(state(&format!("Step {p}")), "finished", "{p}");
    }
    let join = step(&steps, "Step join");
    assert_eq!(join["execution_state"], "cancelled", "{join}");
    assert!(
        join["execute_result"]["error"]
            .as_str()
            .unwrap()
            .contains("`b` (\"Step b\"), which was cancelled"),
        "{join}"
    );
    team.shutdown().await;
}
