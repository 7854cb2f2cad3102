//! Plans a person checks before they run (seed 001's agentPlanCheck), end to end on the
//! operator example with `tool_approval.check_plans`: the hired writer's plan waits; the
//! operator sees it through REST, a stale hash, a wrong kind of approval and an edit naming a
//! skill the writer lacks are refused, and the edited plan is the one that runs.

use crate::support::http;
use crate::support::scratch;

use axum::Router;
use axum::http::StatusCode;
use cohort::actors::{Host, start_team};
use cohort::api::{ApiState, router};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use http::{assert_error, get, post};
use scratch::Scratch;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// The first entry of `GET /api/approvals` of this kind, once there is one.
async fn waiting(app: &Router, token: &str, kind: &str) -> Value {
    for _ in 0..800 {
        let r = get(app, "/api/approvals", token).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        if let Some(a) = r.body["approvals"]
            .as_array()
            .and_then(|l| l.iter().find(|a| a["kind"] == kind))
        {
            return a.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let steps = get(app, "/api/states?type=step", token).await.text;
    panic!("nothing of kind `{kind}` waited for approval: {steps}");
}

/// The operator's session token (the example's password).
async fn login(app: &Router) -> String {
    let login = post(
        app,
        "/api/bind_human_agent",
        None,
        json!({"human_agent_id": "operator", "password": "cohort-demo"}),
    )
    .await;
    login.body["token"].as_str().unwrap().to_owned()
}

/// The operator gives the manager the haiku goal and answers its question about the season;
/// the goal's task.
async fn goal_answered(app: &Router, token: &str, base: &cohort::ids::TaskId) -> Value {
    let send = |task: &Value, content: &str| {
        json!({"human_agent_id": "operator", "task_id": task, "receiver": ["manager"],
               "content": content, "need_reply": false})
    };
    let r = post(
        app,
        "/api/send_message",
        Some(token),
        send(&json!(base), "Write a haiku"),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // The manager's question about the season, asked in the new task.
    let mut task = Value::Null;
    for _ in 0..400 {
        let p = get(app, "/api/human/operator/pending", token).await;
        if let Some(q) = p.body["pending"].as_array().and_then(|l| l.first()) {
            task = q["task_id"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let r = post(app, "/api/send_message", Some(token), send(&task, "Autumn")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    task
}

#[actix::test]
async fn an_edited_plan_runs_in_place_of_the_one_the_writer_made() {
    let cfg = load_team(Path::new("examples/operator/team.yaml")).unwrap();
    assert!(cfg.tool_approval.check_plans, "the example checks plans");
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let api = ApiState::new(&team, &cfg.humans, None, vec![]);
    let app = router(api.clone());
    let token = login(&app).await;
    goal_answered(&app, &token, &team.base_task).await;

    // The writer's plan waits, as the model gave it, and the operator is told.
    let plan = waiting(&app, &token, "plan").await;
    assert_eq!(plan["agent_id"], "writer");
    let intents: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step_intention"].as_str().unwrap())
        .collect();
    assert_eq!(intents, ["Write the haiku", "Check it"]);
    let step = plan["step_id"].as_str().unwrap().to_owned();
    assert_eq!(
        team.monitor.get(StateKind::Step, &step).unwrap()["execution_state"],
        "waiting_for_approval"
    );
    let chats = get(&app, "/api/human/operator/conversations", &token).await;
    assert!(
        chats.text.contains("Plan check: agent `writer`"),
        "{}",
        chats.text
    );
    let writer = team.monitor.get(StateKind::Agent, "writer").unwrap();
    assert_eq!(
        writer["agent_step"]["todo"],
        json!([]),
        "nothing is queued before the check: {:#?}",
        team.monitor
            .snapshot(StateKind::Step)
            .values()
            .filter(|s| s["agent_id"] == "writer")
            .cloned()
            .collect::<Vec<_>>()
    );

    let uri = format!("/api/step/{step}/approve");
    let stale = post(&app, &uri, Some(&token), json!({"plan_hash": "stale"})).await;
    assert_error(&stale, StatusCode::CONFLICT, "a stale plan hash");
    assert!(
        !stale.text.contains(plan["plan_hash"].as_str().unwrap()),
        "the refusal does not tell the right hash: {}",
        stale.text
    );
    let wrong = post(
        &app,
        &uri,
        Some(&token),
        json!({"args_hash": plan["plan_hash"]}),
    )
    .await;
    assert_error(
        &wrong,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a tool call's approval",
    );
    let hire = json!({"plan_hash": plan["plan_hash"], "steps": [
        {"step_intention": "Hire a helper", "executor": "agent_manager"}]});
    let bad = post(&app, &uri, Some(&token), hire).await;
    assert_error(
        &bad,
        StatusCode::UNPROCESSABLE_ENTITY,
        "an edit the writer cannot run",
    );
    assert!(
        bad.text.contains("no `agent_manager` skill"),
        "{}",
        bad.text
    );

    // Edited: the check is dropped and the writing step reworded.
    let edit = json!({"plan_hash": plan["plan_hash"], "steps": [
        {"step_intention": "Write the autumn haiku", "type": "skill", "executor": "think",
         "text_content": "Write a 5-7-5 haiku about autumn rain."}]});
    let ok = post(&app, &uri, Some(&token), edit).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);

    let mut finished = false;
    for _ in 0..800 {
        if team.monitor.snapshot(StateKind::Task).values().any(|t| {
            t["task_name"] == "Haiku for the operator" && t["execution_state"] == "finished"
        }) {
            finished = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(finished, "{:#?}", team.monitor.snapshot(StateKind::Task));
    let checked = team.monitor.get(StateKind::Step, &step).unwrap();
    assert_eq!(checked["execution_state"], "finished");
    assert_eq!(checked["execute_result"]["plan_check"]["by"], "operator");
    assert_eq!(checked["execute_result"]["plan_check"]["edited"], true);
    let writer_steps: Vec<Value> = team
        .monitor
        .snapshot(StateKind::Step)
        .into_values()
        .filter(|s| s["agent_id"] == "writer")
        .collect();
    let ran = |intent: &str| writer_steps.iter().any(|s| s["step_intention"] == intent);
    assert!(ran("Write the autumn haiku"), "{writer_steps:#?}");
    assert!(
        !ran("Check it") && !ran("Write the haiku"),
        "{writer_steps:#?}"
    );
    team.shutdown().await;
}

/// A plan waiting for its check waits on across a restart, and once confirmed its steps run
/// (the restarted agent is not left thinking it is busy).
#[actix::test]
async fn a_plan_waiting_for_its_check_waits_on_after_a_restart() {
    use cohort::actors::start_team_stored;
    use cohort::store::{SqlStore, load};
    let dir = Scratch::new("plan-restart");
    let cfg = load_team(Path::new("examples/operator/team.yaml")).unwrap();
    assert!(cfg.tool_approval.check_plans, "the example checks plans");
    let file = dir.join("team.db");
    let open = || async {
        let store = std::sync::Arc::new(SqlStore::open_sqlite(&file).await.unwrap());
        let loaded = load(store.as_ref()).await.unwrap();
        let team = start_team_stored(
            &cfg,
            &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort")),
            store,
            loaded,
        )
        .unwrap();
        let api = ApiState::new(&team, &cfg.humans, None, vec![]);
        let app = router(api);
        let token = login(&app).await;
        (team, app, token)
    };
    let (team, app, token) = open().await;
    let task = goal_answered(&app, &token, &team.base_task).await;
    let mut plan = waiting(&app, &token, "plan").await;
    // Its deadline is set once the wait starts (a moment after the plan is listed).
    for _ in 0..200 {
        if !plan["decide_by_ms"].is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        plan = waiting(&app, &token, "plan").await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    team.shutdown().await;
    team.monitor.close();
    drop(team);

    let (team, app, token) = open().await;
    let again = waiting(&app, &token, "plan").await;
    assert_eq!(
        again["step_id"], plan["step_id"],
        "the same plan still waits"
    );
    assert_eq!(
        again["decide_by_ms"], plan["decide_by_ms"],
        "with the same deadline"
    );
    let uri = format!("/api/step/{}/approve", plan["step_id"].as_str().unwrap());
    let ok = post(
        &app,
        &uri,
        Some(&token),
        json!({"plan_hash": plan["plan_hash"]}),
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    let mut finished = false;
    for _ in 0..800 {
        let t = team
            .monitor
            .get(StateKind::Task, task.as_str().unwrap())
            .unwrap();
        if t["execution_state"] == "finished" {
            finished = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(finished, "{:#?}", team.monitor.snapshot(StateKind::Task));
    team.shutdown().await;
    team.monitor.close();
}

/// A manager's stages wait too (`tool_approval.check_stages`): the operator edits the stage
/// (its intention and the writer's goal) and the edited stage is the one that runs; a stage
/// naming an agent the team lacks is refused by SyncState (422) and the stages keep waiting.
#[actix::test]
async fn a_managers_stages_wait_for_the_operator_and_run_as_edited() {
    let mut cfg = load_team(Path::new("examples/operator/team.yaml")).unwrap();
    cfg.tool_approval.check_stages = true;
    cfg.tool_approval.check_plans = false;
    for a in &mut cfg.agents {
        a.tool_approval = cfg.tool_approval;
    }
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let api = ApiState::new(&team, &cfg.humans, None, vec![]);
    let app = router(api.clone());
    let token = login(&app).await;
    let task = goal_answered(&app, &token, &team.base_task).await;

    let plan = waiting(&app, &token, "plan").await;
    assert_eq!(plan["agent_id"], "manager");
    assert_eq!(
        plan["stages"]["stages"][0]["stage_intention"],
        "Write the haiku"
    );
    assert!(
        team.monitor.read(
            |s| s.tasks[&cohort::ids::TaskId::from(task.as_str().unwrap())]
                .stage_list
                .is_empty()
        ),
        "no stage before the check"
    );
    let uri = format!("/api/step/{}/approve", plan["step_id"].as_str().unwrap());
    let ghost = json!({"plan_hash": plan["plan_hash"], "stages": [
        {"stage_intention": "Write it", "agent_allocation": {"nobody": "write"}}]});
    let refused = post(&app, &uri, Some(&token), ghost).await;
    assert_error(
        &refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a stage for an agent the team lacks",
    );
    assert_eq!(
        waiting(&app, &token, "plan").await["step_id"],
        plan["step_id"],
        "still waiting"
    );
    let edited = json!({"plan_hash": plan["plan_hash"], "stages": [
        {"stage_intention": "Write the autumn haiku", "agent_allocation": {"writer": "Write a 5-7-5 haiku about autumn."}}]});
    let ok = post(&app, &uri, Some(&token), edited).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);

    let mut finished = None;
    for _ in 0..800 {
        let t = team
            .monitor
            .get(StateKind::Task, task.as_str().unwrap())
            .unwrap();
        if t["execution_state"] == "finished" {
            finished = Some(t);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let t = finished.unwrap_or_else(|| panic!("{:#?}", team.monitor.snapshot(StateKind::Task)));
    let stage = team
        .monitor
        .get(StateKind::Stage, t["stage_list"][0].as_str().unwrap())
        .unwrap();
    assert_eq!(stage["stage_intention"], "Write the autumn haiku");
    let checked = team
        .monitor
        .get(StateKind::Step, plan["step_id"].as_str().unwrap())
        .unwrap();
    assert_eq!(checked["execution_state"], "finished");
    assert_eq!(checked["execute_result"]["plan_check"]["edited"], true);
    team.shutdown().await;
}
