//! An operator's control of running work. Cancelling a task while an agent's LLM call for it
//! is in flight: the task and its open stages become `cancelled`, the call is abandoned at once
//! (not waited for), the step fails saying so, and the agent is free for other work. Pausing
//! an agent: it starts no step until resumed, then the work goes on. Retrying a running stage:
//! a fresh copy with the same agents starts, and the old stage's call in flight is abandoned.
//! Cancelling one step mid-LLM-call or mid-tool-call: it ends `cancelled` at once and its
//! agent goes on.

use crate::support::mcp;

use cohort::actors::{
    CancelStep, CancelStepFor, CancelTask, ControlRefused, GetAgentState, Host, PauseFor,
    RetryStage, start_team,
};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use cohort::state::StepState;
use cohort::step::cancel::CancelError;
use mcp::scratch::Scratch;
use std::path::Path;
use std::time::{Duration, Instant};

/// The quickstart team, its writer's first draft taking a minute to write.
fn slow_quickstart(tag: &str) -> Scratch {
    // Each test its own folder: `cargo test` runs a binary's tests side by side in one process.
    let dir = Scratch::new(&format!("control-{tag}"));
    std::fs::copy("examples/quickstart/team.yaml", dir.join("team.yaml")).unwrap();
    let script = std::fs::read_to_string(Path::new("examples/quickstart/script.yaml")).unwrap();
    let draft = r#"      - "<think>Draft:\n  Rain on the eaves\n  the maple lets go its red\n  one leaf at a time</think>""#;
    assert!(script.contains(draft));
    let slow = script.replacen(
        draft,
        "      - text: \"<think>Draft: rain</think>\"\n        delay_ms: 60000",
        1,
    );
    std::fs::write(dir.join("script.yaml"), slow).unwrap();
    dir
}

/// The slow quickstart started with the haiku goal, once the writer's draft is running: the
/// team (and its folder) with the draft step.
async fn draft_running(tag: &str) -> (Scratch, cohort::actors::Team, StepState) {
    let dir = slow_quickstart(tag);
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "Write a haiku about autumn rain")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let running = team.monitor.read(|s| {
            s.steps()
                .find(|st| {
                    st.agent_id.as_str() == "writer"
                        && st.step_intention == "Draft the haiku"
                        && st.execution_state == cohort::state::StepExecutionState::Running
                })
                .cloned()
        });
        if let Some(step) = running {
            return (dir, team, step);
        }
        assert!(Instant::now() < deadline, "the draft never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix::test]
async fn cancelling_a_task_abandons_the_call_in_flight_and_frees_the_agent() {
    let (_dir, team, draft) = draft_running("cancel").await;
    let (task, step) = (draft.task_id, draft.step_id);
    tokio::time::sleep(Duration::from_millis(200)).await;

    let cancelled_at = Instant::now();
    team.sync
        .send(CancelTask {
            task_id: task.clone(),
            by: "operator".into(),
            reason: "changed my mind".into(),
        })
        .await
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (state, step_state) = team.monitor.read(|s| {
            (
                s.tasks[&task].execution_state,
                s.step(&step).map(|st| st.execution_state),
            )
        });
        // Set aside, not failed: the agent did nothing wrong.
        if state == cohort::state::ExecutionState::Cancelled
            && step_state == Some(cohort::state::StepExecutionState::Cancelled)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not cancelled: {state:?} {step_state:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(10),
        "the minute-long call was not waited for"
    );
    let task_json = team.monitor.get(StateKind::Task, task.as_str()).unwrap();
    assert_eq!(task_json["task_summary"], "", "no manager's words");
    assert_eq!(
        task_json["summary_written"],
        serde_json::json!({"written": "cancelled", "by": "operator", "reason": "changed my mind"})
    );
    assert_eq!(
        task_json["outcome"]["why"],
        "Cancelled by `operator`: changed my mind"
    );
    let step_json = team.monitor.get(StateKind::Step, step.as_str()).unwrap();
    let result = &step_json["execute_result"];
    assert_eq!(
        result["cancelled"]["reason"], "its stage or task ended",
        "{step_json}"
    );
    assert!(
        result["cancelled"].get("by").is_none(),
        "set aside by the runtime, not by a person: {step_json}"
    );
    for s in team.monitor.snapshot(StateKind::Stage).values() {
        if s["task_id"] == task.as_str() {
            assert_eq!(s["execution_state"], "cancelled", "{s}");
        }
    }
    // The writer is free again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let w = team.agents[&"writer".into()]
            .send(GetAgentState)
            .await
            .unwrap();
        if w.agent_step.todo_len() == 0
            && w.derive_working_state() == cohort::state::WorkingState::Idle
        {
            break;
        }
        assert!(Instant::now() < deadline, "the writer stayed busy");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix::test]
async fn a_paused_agent_starts_nothing_until_it_is_resumed() {
    let cfg = load_team(Path::new("examples/quickstart/team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.dispatcher
        .send(PauseFor("writer".into(), true))
        .await
        .unwrap()
        .unwrap();
    team.submit_goal(None, "Write a haiku about autumn rain")
        .await
        .unwrap();
    // The writer's planning step is queued and stays so; the state says it is paused.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let w = team.agents[&"writer".into()]
            .send(GetAgentState)
            .await
            .unwrap();
        if w.agent_step.todo_len() > 0 {
            assert!(w.paused);
            break;
        }
        assert!(Instant::now() < deadline, "the writer never got work");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let w = team.agents[&"writer".into()]
        .send(GetAgentState)
        .await
        .unwrap();
    assert!(
        w.agent_step.running().is_none() && w.agent_step.todo_len() > 0,
        "nothing started"
    );
    assert_eq!(
        team.monitor.get(StateKind::Agent, "writer").unwrap()["paused"],
        true
    );

    team.dispatcher
        .send(PauseFor("writer".into(), false))
        .await
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let done =
            team.monitor.snapshot(StateKind::Task).values().any(|t| {
                t["task_name"] == "Autumn rain haiku" && t["execution_state"] == "finished"
            });
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the task never finished after the resume"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix::test]
async fn retrying_a_running_stage_starts_it_afresh_and_abandons_its_old_call() {
    let (_dir, team, draft) = draft_running("retry").await;
    let (task, stage, step) = (draft.task_id, draft.stage_id, draft.step_id);
    let stage_id = stage.stage().unwrap().clone();
    team.sync
        .send(RetryStage {
            task_id: task.clone(),
            stage_id: stage_id.clone(),
            by: "operator".into(),
        })
        .await
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (old, fresh, step_state) = team.monitor.read(|s| {
            let list = &s.tasks[&task].stage_list;
            let fresh = list
                .iter()
                .position(|x| x == &stage_id)
                .and_then(|i| list.get(i + 1))
                .and_then(|id| s.stages.get(id))
                .map(|st| (st.execution_state, st.agent_allocation.len()));
            (
                s.stages[&stage_id].execution_state,
                fresh,
                s.step(&step).map(|st| st.execution_state),
            )
        });
        // The fresh copy started (scripted, it may well have finished already).
        let started = fresh.is_some_and(|(state, agents)| {
            agents == 2
                && matches!(
                    state,
                    cohort::state::ExecutionState::Running
                        | cohort::state::ExecutionState::Finished
                )
        });
        if old == cohort::state::ExecutionState::Failed
            && started
            && step_state == Some(cohort::state::StepExecutionState::Cancelled)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{old:?} {fresh:?} {step_state:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Cancels `step` of `agent` as the operator, then waits until it is `cancelled`; how long
/// that took, and the step as the monitor shows it.
async fn cancel_step(
    team: &cohort::actors::Team,
    agent: &str,
    step: &cohort::ids::StepId,
) -> (Duration, serde_json::Value) {
    let asked = Instant::now();
    let cancel = CancelStep {
        step_id: step.clone(),
        by: "operator".into(),
        reason: "not this way".into(),
    };
    team.dispatcher
        .send(CancelStepFor(agent.into(), cancel))
        .await
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = team.monitor.get(StateKind::Step, step.as_str()).unwrap();
        if s["execution_state"] == "cancelled" {
            return (asked.elapsed(), s);
        }
        assert!(Instant::now() < deadline, "never cancelled: {s:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix::test]
async fn cancelling_a_step_mid_llm_call_ends_it_at_once_and_its_agent_goes_on() {
    let (_dir, team, draft) = draft_running("cancel-step").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (took, s) = cancel_step(&team, "writer", &draft.step_id).await;
    assert!(
        took < Duration::from_secs(10),
        "the minute-long call was not waited for"
    );
    assert_eq!(s["execute_result"]["cancelled"]["by"], "operator");
    assert_eq!(s["execute_result"]["cancelled"]["reason"], "not this way");
    // Cancelling it again is refused: it is over. (The monitor may show the closing before
    // the writer has SyncState's answer: until then the step is ending, and a cancel is
    // refused as such. The rest of the task's replies are instant: by the time the monitor
    // shows the cancel, the task may have finished and its steps left the writer.)
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let again = CancelStep {
            step_id: draft.step_id.clone(),
            by: "operator".into(),
            reason: String::new(),
        };
        let refused = team
            .dispatcher
            .send(CancelStepFor("writer".into(), again))
            .await
            .unwrap()
            .unwrap_err();
        match refused {
            ControlRefused::NotCancelled(CancelError::Ending(_)) => {
                assert!(Instant::now() < deadline, "the step stayed ending");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            ControlRefused::NotCancelled(CancelError::Over(_, state)) => {
                assert_eq!(state, cohort::state::StepExecutionState::Cancelled);
                break;
            }
            ControlRefused::NotCancelled(CancelError::NoStep(..)) => {
                let task = team.monitor.get(StateKind::Task, draft.task_id.as_str());
                assert_eq!(task.unwrap()["execution_state"], "finished");
                break;
            }
            other => panic!("{other}"),
        }
    }
    // The writer goes on with its next step in the stage (the task was open when the draft
    // was cancelled).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let later = team.monitor.read(|s| {
            s.steps().any(|st| {
                st.agent_id.as_str() == "writer"
                    && st.task_id == draft.task_id
                    && st.step_id != draft.step_id
                    && st.execution_state != cohort::state::StepExecutionState::Init
                    && !st.step_intention.contains("Plan")
                    && st.execution_state != cohort::state::StepExecutionState::Cancelled
            })
        });
        if later {
            break;
        }
        assert!(Instant::now() < deadline, "the writer did not go on");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let task = team
        .monitor
        .get(StateKind::Task, draft.task_id.as_str())
        .unwrap();
    assert_ne!(
        task["execution_state"], "cancelled",
        "only the step was cancelled"
    );
}

#[actix::test]
async fn cancelling_a_step_mid_tool_call_abandons_the_call() {
    // The tools example, its clerk calling server-everything's minute-long operation.
    let dir = Scratch::new("control-tool");
    for sub in ["servers", "workspace"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::copy(
        "examples/tools/servers/workspace.yaml",
        dir.join("servers/workspace.yaml"),
    )
    .unwrap();
    let js = mcp::everything_js();
    std::fs::write(
        dir.join("servers/ev.yaml"),
        format!(
            "name: ev\ndescription: server-everything\ncommand: node\nargs: [\"{}\", stdio]\ntimeout_secs: 120\n",
            js.display()
        ),
    )
    .unwrap();
    let team_yaml = std::fs::read_to_string("examples/tools/team.yaml").unwrap();
    let team_yaml = team_yaml.replace("tools: [workspace]", "tools: [workspace, ev]");
    std::fs::write(dir.join("team.yaml"), team_yaml).unwrap();
    let script = std::fs::read_to_string("examples/tools/script.yaml").unwrap();
    let long = r#"'<tool_instruction>{"tool_name": "trigger-long-running-operation", "arguments": {"duration": 60, "steps": 1}}</tool_instruction>'"#;
    let script = script
        .replacen(
            r#""type": "tool", "executor": "workspace""#,
            r#""type": "tool", "executor": "ev""#,
            1,
        )
        .replacen(
            r#"'<tool_instruction>{"instruction_type": "get_description"}</tool_instruction>'"#,
            long,
            1,
        );
    std::fs::write(dir.join("script.yaml"), script).unwrap();

    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "Write a greeting file")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let call = loop {
        let running = team.monitor.read(|s| {
            s.steps()
                .find(|st| {
                    st.executor.name() == "ev"
                        && st.execution_state == cohort::state::StepExecutionState::Running
                })
                .cloned()
        });
        if let Some(step) = running {
            break step;
        }
        assert!(Instant::now() < deadline, "the long call never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (took, s) = cancel_step(&team, "clerk", &call.step_id).await;
    assert!(
        took < Duration::from_secs(10),
        "the minute-long call was not waited for"
    );
    assert!(
        s["execute_result"]["error"]
            .as_str()
            .unwrap()
            .contains("cancelled by `operator`")
    );
    // The clerk decides how to go on after the call (its tool_decision step follows).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let next = team.monitor.read(|s| {
            s.steps().any(|st| {
                st.agent_id.as_str() == "clerk"
                    && st.executor.name() == "tool_decision"
                    && st.execution_state != cohort::state::StepExecutionState::Init
            })
        });
        if next {
            break;
        }
        assert!(Instant::now() < deadline, "the clerk did not go on");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    team.shutdown().await;
}

#[actix::test]
async fn a_paused_task_starts_no_step_until_it_is_resumed() {
    use cohort::actors::PauseTask;
    use cohort::state::StepExecutionState::{Init, Running};
    let cfg = load_team(Path::new("examples/quickstart/team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "Write a haiku about autumn rain")
        .await
        .unwrap();
    // Paused as soon as it exists.
    let deadline = Instant::now() + Duration::from_secs(20);
    let task = loop {
        let t = team
            .monitor
            .read(|s| s.tasks.keys().find(|t| **t != team.base_task).cloned());
        if let Some(t) = t {
            break t;
        }
        assert!(Instant::now() < deadline, "no task was created");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let pause = |paused| PauseTask {
        task_id: task.clone(),
        by: "operator".into(),
        paused,
    };
    team.sync.send(pause(true)).await.unwrap().unwrap();
    // Once every agent of the task was told, and the steps that were running are done,
    // nothing of the task moves.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let told = team.monitor.read(|s| {
            s.tasks[&task]
                .task_group
                .iter()
                .all(|a| s.agents[a].paused_tasks.contains(&task))
        });
        if told {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the task's agents were never told"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = || {
        team.monitor.read(|s| {
            let steps: Vec<_> = s.steps().filter(|st| st.task_id == task).collect();
            let running = steps.iter().any(|st| st.execution_state == Running);
            let moved = steps.iter().filter(|st| st.execution_state != Init).count();
            (running, moved)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while started().0 {
        assert!(
            Instant::now() < deadline,
            "a step of the paused task kept running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = started().1;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        started(),
        (false, before),
        "a step of the paused task started"
    );
    let t = team.monitor.get(StateKind::Task, task.as_str()).unwrap();
    assert_eq!(t["paused"], true);
    assert_ne!(t["execution_state"], "finished");
    let manager = team.monitor.get(StateKind::Agent, "manager").unwrap();
    assert_eq!(manager["paused_tasks"], serde_json::json!([task]));

    team.sync.send(pause(false)).await.unwrap().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = team.monitor.get(StateKind::Task, task.as_str()).unwrap();
        if t["execution_state"] == "finished" {
            assert!(t.get("paused").is_none_or(|p| p == false), "{t}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the task never finished after the resume"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A task that is over cannot be paused.
    let over = team.sync.send(pause(true)).await.unwrap();
    assert!(over.is_err());
}
