//! Tool calls that wait for a person, end to end on the tools example (the bundled workspace
//! server, whose `write_file` is destructive): with the clerk allowed to run calls up to
//! MEDIUM on its own, the write waits; the operator sees it through REST with its exact
//! arguments and risk, and approves it (as written or edited) or rejects it with a reason.

use crate::support::scratch;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use cohort::actors::{Host, Team, start_team};
use cohort::api::{ApiState, router};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use cohort::policy::{ApprovalPolicy, Risk};
use scratch::Scratch;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tower::ServiceExt;

const PASSWORD: &str = "cohort-demo";

/// A private copy of the tools example (its own workspace folder), the clerk set to ask.
fn config(tag: &str) -> (Scratch, cohort::config::TeamConfig) {
    let dir = Scratch::new(&format!("approval-{tag}"));
    for sub in ["servers", "workspace"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    for f in ["team.yaml", "script.yaml", "servers/workspace.yaml"] {
        std::fs::copy(Path::new("examples/tools").join(f), dir.join(f)).unwrap();
    }
    let mut cfg = load_team(&dir.join("team.yaml")).unwrap();
    for a in cfg.agents.iter_mut().filter(|a| a.id.as_str() == "clerk") {
        a.tool_approval = ApprovalPolicy {
            auto_run_up_to: Some(Risk::Medium),
            ..Default::default()
        };
    }
    (dir, cfg)
}

fn team(tag: &str) -> (Scratch, Team, ApiState) {
    let (dir, cfg) = config(tag);
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let api = ApiState::new(&team, &cfg.humans, None, vec![]);
    (dir, team, api)
}

async fn call(
    api: &ApiState,
    method: &str,
    uri: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(body.map(|b| Body::from(b.to_string())).unwrap_or_default())
        .unwrap();
    let res = router(api.clone()).oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn login(api: &ApiState) -> String {
    let body = json!({"human_agent_id": "operator", "password": PASSWORD});
    let req = Request::post("/api/bind_human_agent")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let res = router(api.clone()).oneshot(req).await.unwrap();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["token"].as_str().unwrap().to_owned()
}

/// The one call waiting for approval, once it is there.
async fn waiting_call(api: &ApiState, token: &str) -> Value {
    for _ in 0..800 {
        let (status, body) = call(api, "GET", "/api/approvals", token, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if let Some(first) = body["approvals"].as_array().and_then(|a| a.first()) {
            return first.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no tool call ever waited for approval");
}

async fn task_ends(team: &Team) -> Value {
    for _ in 0..800 {
        let done = team
            .monitor
            .snapshot(StateKind::Task)
            .into_values()
            .find(|t| t["task_name"] == "Greeting file" && t["execution_state"] == "finished");
        if let Some(t) = done {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the task never finished: {:#?}",
        team.monitor.snapshot(StateKind::Task)
    );
}

fn clerk_step(team: &Team, id: &str) -> Value {
    team.monitor.get(StateKind::Step, id).unwrap()
}

/// The team of `file` (a changed copy of the example) with the clerk under `policy`, started
/// and given the greeting goal; the operator logged in.
async fn greeting_goal(file: &Path, policy: ApprovalPolicy) -> (Team, ApiState, String) {
    let mut cfg = load_team(file).unwrap();
    for a in cfg.agents.iter_mut().filter(|a| a.id.as_str() == "clerk") {
        a.tool_approval = policy;
    }
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let api = ApiState::new(&team, &cfg.humans, None, vec![]);
    let token = login(&api).await;
    team.submit_goal(None, "Write a greeting file")
        .await
        .unwrap();
    (team, api, token)
}

#[actix::test]
async fn a_destructive_call_waits_and_runs_with_the_arguments_the_operator_approved() {
    let (dir, team, api) = team("approve");
    let token = login(&api).await;
    team.submit_goal(None, "Write a greeting file")
        .await
        .unwrap();

    let waiting = waiting_call(&api, &token).await;
    assert_eq!(waiting["tool"], "write_file");
    assert_eq!(waiting["risk"], "high");
    assert!(
        waiting["reason"]
            .as_str()
            .unwrap()
            .contains("destructiveHint")
    );
    assert_eq!(waiting["arguments"]["path"], "hello.txt");
    // HIGH: the person is warned what the call may do before approving it.
    assert!(
        waiting["warning"]
            .as_str()
            .is_some_and(|w| w.contains("HIGH risk: it may overwrite or delete things")),
        "{waiting}"
    );
    let step = waiting["step_id"].as_str().unwrap().to_owned();
    assert_eq!(
        clerk_step(&team, &step)["execution_state"],
        "waiting_for_approval"
    );
    assert!(
        !dir.join("workspace/hello.txt").exists(),
        "nothing written before approval"
    );
    // The operator was told, with the tool, the exact arguments' hash and the risk.
    let mut told = String::new();
    for _ in 0..400 {
        let (_, chats) = call(
            &api,
            "GET",
            "/api/human/operator/conversations",
            &token,
            None,
        )
        .await;
        told = chats.to_string();
        if told.contains("Approval needed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        told.contains("write_file") && told.contains("Risk HIGH") && told.contains("Careful:"),
        "{told}"
    );
    // The message is for a person: no hash and no route (GET /api/approvals has the hash).
    assert!(
        !told.contains(waiting["args_hash"].as_str().unwrap()) && !told.contains("POST /api"),
        "{told}"
    );

    // An approval for other arguments than the ones shown is refused; edited arguments run.
    let uri = format!("/api/step/{step}/approve");
    let (status, refusal) = call(
        &api,
        "POST",
        &uri,
        &token,
        Some(json!({"args_hash": "stale"})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    // It does not tell the right hash: a verdict is given on what was read, not copied.
    assert!(
        !refusal
            .to_string()
            .contains(waiting["args_hash"].as_str().unwrap()),
        "{refusal}"
    );
    let edited = json!({"path": "hello.txt", "content": "Edited by the operator\n"});
    let body = json!({"args_hash": waiting["args_hash"], "arguments": edited});
    let (status, answer) = call(&api, "POST", &uri, &token, Some(body.clone())).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (again, _) = call(&api, "POST", &uri, &token, Some(body)).await;
    assert_eq!(again, StatusCode::CONFLICT, "a verdict counts once");

    task_ends(&team).await;
    let written = std::fs::read_to_string(dir.join("workspace/hello.txt")).unwrap();
    assert_eq!(written, "Edited by the operator\n");
    let s = clerk_step(&team, &step);
    assert_eq!(s["execution_state"], "finished");
    assert_eq!(
        s["instruction_content"]["arguments"]["content"],
        "Edited by the operator\n"
    );
    team.shutdown().await;
}

#[actix::test]
async fn a_call_rejected_to_skip_it_fails_its_step_with_the_reason_and_never_runs() {
    let (dir, team, api) = team("reject");
    let token = login(&api).await;
    team.submit_goal(None, "Write a greeting file")
        .await
        .unwrap();
    let waiting = waiting_call(&api, &token).await;
    let step = waiting["step_id"].as_str().unwrap().to_owned();
    let uri = format!("/api/step/{step}/reject");
    let (status, _) = call(&api, "POST", &uri, &token, Some(json!({"reason": " "}))).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a rejection needs a reason"
    );
    let body = json!({"reason": "not in the shared folder, please", "then": "skip"});
    let (status, answer) = call(&api, "POST", &uri, &token, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    for _ in 0..400 {
        if clerk_step(&team, &step)["execution_state"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let s = clerk_step(&team, &step);
    assert_eq!(s["execution_state"], "failed", "{s}");
    let why = s["execute_result"]["error"].as_str().unwrap();
    assert!(
        why.contains("`operator` rejected") && why.contains("not in the shared folder"),
        "{why}"
    );
    assert!(
        !dir.join("workspace/hello.txt").exists(),
        "the rejected call never ran"
    );
    team.shutdown().await;
}

#[actix::test]
async fn a_rejected_call_cancels_its_task_as_seed_000_says_and_the_goal_giver_is_told() {
    let (dir, team, api) = team("reject-cancel");
    let token = login(&api).await;
    team.submit_goal(None, "Write a greeting file")
        .await
        .unwrap();
    let waiting = waiting_call(&api, &token).await;
    let step = waiting["step_id"].as_str().unwrap().to_owned();
    let task = waiting["task_id"].as_str().unwrap().to_owned();
    let uri = format!("/api/step/{step}/reject");
    let (status, _) = call(&api, "POST", &uri, &token, Some(json!({"reason": ""}))).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a cancel needs a reason"
    );
    let body = json!({"reason": "wrong folder altogether"});
    let (status, answer) = call(&api, "POST", &uri, &token, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["cancelled"], true, "{answer}");
    let state = |kind: &str, id: &str| team.monitor.read(|s| s.all_json()[kind][id].clone());
    for _ in 0..400 {
        if state("step", &step)["execution_state"] == "cancelled" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(state("step", &step)["execution_state"], "cancelled");
    let t = state("task", &task);
    assert_eq!(t["execution_state"], "cancelled", "{t}");
    // Who cancelled and why: the runtime's part of the summary, and the task's record.
    assert_eq!(t["summary_written"]["written"], "cancelled", "{t}");
    assert!(
        t["summary_written"]["reason"]
            .as_str()
            .unwrap()
            .contains("wrong folder altogether"),
        "{t}"
    );
    assert!(
        t["outcome"]["why"]
            .as_str()
            .unwrap()
            .contains("wrong folder altogether"),
        "{t}"
    );
    assert!(
        !dir.join("workspace/hello.txt").exists(),
        "the call never ran"
    );
    // Over: a second verdict is refused.
    let (status, _) = call(&api, "POST", &uri, &token, Some(json!({"reason": "again"}))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    team.shutdown().await;
}

#[actix::test]
async fn a_call_waiting_for_approval_waits_on_after_a_restart() {
    use cohort::actors::start_team_stored;
    use cohort::store::{SqlStore, load};
    let (dir, cfg) = config("restart");
    let file = dir.join("team.db");
    let open = || async {
        let store = std::sync::Arc::new(SqlStore::open_sqlite(&file).await.unwrap());
        let loaded = load(store.as_ref()).await.unwrap();
        let vars = |_: &str| None;
        let host = Host::new(&vars, env!("CARGO_BIN_EXE_cohort"));
        let team = start_team_stored(&cfg, &host, store, loaded).unwrap();
        let api = ApiState::new(&team, &cfg.humans, None, vec![]);
        (team, api)
    };
    let (team, api) = open().await;
    let token = login(&api).await;
    team.submit_goal(None, "Write a greeting file")
        .await
        .unwrap();
    let waiting = waiting_call(&api, &token).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    team.shutdown().await;
    team.monitor.close();
    drop(team);

    let (team, api) = open().await;
    let token = login(&api).await;
    let again = waiting_call(&api, &token).await;
    assert_eq!(
        again["step_id"], waiting["step_id"],
        "the same call still waits"
    );
    let uri = format!("/api/step/{}/approve", waiting["step_id"].as_str().unwrap());
    let (status, answer) = call(
        &api,
        "POST",
        &uri,
        &token,
        Some(json!({"args_hash": waiting["args_hash"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    task_ends(&team).await;
    assert_eq!(
        std::fs::read_to_string(dir.join("workspace/hello.txt")).unwrap(),
        "Hello from Cohort!\n"
    );
    team.shutdown().await;
    team.monitor.close();
}

#[actix::test]
async fn a_missing_argument_is_filled_in_by_the_operator_and_the_call_runs() {
    let (dir, cfg) = config("params");
    // The clerk forgets the file's content; a person fills it in.
    let script = std::fs::read_to_string(dir.join("script.yaml")).unwrap();
    let forgetful = script.replace(
        r#""arguments": {"path": "hello.txt", "content": "Hello from Cohort!\n"}"#,
        r#""arguments": {"path": "hello.txt"}"#,
    );
    assert_ne!(script, forgetful);
    std::fs::write(dir.join("script.yaml"), forgetful).unwrap();
    let (team, api, token) = greeting_goal(
        &cfg.file,
        ApprovalPolicy {
            auto_run_up_to: Some(Risk::Medium),
            ask_for_params: Some(true),
            ..Default::default()
        },
    )
    .await;

    let asked = waiting_call(&api, &token).await;
    assert_eq!(asked["kind"], "params", "{asked:#}");
    assert_eq!(asked["tool"], "write_file");
    assert_eq!(asked["form"]["mode"], "form");
    assert_eq!(asked["form"]["fields"][0]["key"], "content");
    assert!(asked["reason"].as_str().unwrap().contains("`content`"));
    let step = asked["step_id"].as_str().unwrap().to_owned();
    assert_eq!(
        clerk_step(&team, &step)["execution_state"],
        "waiting_for_param"
    );
    let uri = format!("/api/step/{step}/params");
    let (status, _) = call(&api, "POST", &uri, &token, Some(json!({"values": {}}))).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "the field is required"
    );
    let (status, _) = call(&api, "POST", &uri, &token, Some(json!({"values": "hi"}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let values = json!({"values": {"content": "Filled in by a person\n"}});
    let (status, answer) = call(&api, "POST", &uri, &token, Some(values)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // The completed call is judged again: writing is HIGH risk for this clerk, so it waits
    // for approval, with the filled-in arguments.
    let mut waiting = waiting_call(&api, &token).await;
    for _ in 0..400 {
        if waiting["kind"] == "tool_call" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        waiting = waiting_call(&api, &token).await;
    }
    assert_eq!(waiting["step_id"], step.as_str());
    assert_eq!(waiting["arguments"]["content"], "Filled in by a person\n");
    let approve = format!("/api/step/{step}/approve");
    let body = json!({"args_hash": waiting["args_hash"]});
    let (status, answer) = call(&api, "POST", &approve, &token, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    task_ends(&team).await;
    assert_eq!(
        std::fs::read_to_string(dir.join("workspace/hello.txt")).unwrap(),
        "Filled in by a person\n"
    );
    team.shutdown().await;
}

#[actix::test]
async fn a_call_no_one_decides_on_in_time_is_not_run_and_the_clerk_goes_on() {
    let (dir, mut cfg) = config("overdue");
    cfg.waits.human = Duration::from_millis(400);
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let api = ApiState::new(&team, &cfg.humans, None, vec![]);
    let token = login(&api).await;
    team.submit_goal(None, "Write a greeting file")
        .await
        .unwrap();
    let waiting = waiting_call(&api, &token).await;
    assert!(waiting["decide_by_ms"].as_i64().is_some(), "{waiting:#}");
    let step = waiting["step_id"].as_str().unwrap().to_owned();
    for _ in 0..400 {
        if clerk_step(&team, &step)["execution_state"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let s = clerk_step(&team, &step);
    assert_eq!(s["execution_state"], "failed", "{s:#}");
    assert!(
        s["execute_result"]["error"]
            .as_str()
            .unwrap()
            .contains("no operator decided"),
        "{s:#}"
    );
    assert!(
        !dir.join("workspace/hello.txt").exists(),
        "the call never ran"
    );
    // The clerk decides how to go on after the call that did not happen.
    let mut went_on = false;
    for _ in 0..400 {
        went_on = team.monitor.read(|st| {
            st.steps().any(|x| {
                x.agent_id.as_str() == "clerk"
                    && x.executor.name() == "tool_decision"
                    && x.text_content.contains("failed")
            })
        });
        if went_on {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(went_on, "the clerk did not go on");
    let (_, approvals) = call(&api, "GET", "/api/approvals", &token, None).await;
    assert_eq!(approvals["approvals"], json!([]), "nothing waits any more");
    team.shutdown().await;
}

#[actix::test]
async fn a_call_the_model_judges_riskier_than_its_annotations_waits_for_approval() {
    let (dir, cfg) = config("judged");
    // The clerk's model judges each call its annotations would let run: reading hello.txt it
    // calls HIGH (the write is HIGH by its annotations already, and is not judged).
    let script = std::fs::read_to_string(dir.join("script.yaml")).unwrap();
    let judged = script.replace(
        "    reflection:\n",
        "    risk_judge:\n      - '<tool_risk>{\"risk\": \"high\", \"reason\": \"the file may hold a secret\"}</tool_risk>'\n    reflection:\n",
    );
    assert_ne!(script, judged);
    std::fs::write(dir.join("script.yaml"), judged).unwrap();
    let (team, api, token) = greeting_goal(
        &cfg.file,
        ApprovalPolicy {
            auto_run_up_to: Some(Risk::Medium),
            judge_with_llm: true,
            ..Default::default()
        },
    )
    .await;
    let write = waiting_call(&api, &token).await;
    assert_eq!(write["tool"], "write_file");
    assert!(
        !write["reason"].as_str().unwrap().contains("judged"),
        "{write:#}"
    );
    let uri = format!("/api/step/{}/approve", write["step_id"].as_str().unwrap());
    let (status, answer) = call(
        &api,
        "POST",
        &uri,
        &token,
        Some(json!({"args_hash": write["args_hash"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    let mut read = Value::Null;
    for _ in 0..400 {
        let (_, list) = call(&api, "GET", "/api/approvals", &token, None).await;
        if let Some(r) = list["approvals"]
            .as_array()
            .and_then(|l| l.iter().find(|a| a["tool"] == "read_file"))
        {
            read = r.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        read["risk"], "high",
        "a read the model judged HIGH waits: {read:#}"
    );
    assert!(
        read["reason"]
            .as_str()
            .unwrap()
            .contains("judged by the model for these arguments: the file may hold a secret"),
        "{read:#}"
    );
    let uri = format!("/api/step/{}/approve", read["step_id"].as_str().unwrap());
    let (status, answer) = call(
        &api,
        "POST",
        &uri,
        &token,
        Some(json!({"args_hash": read["args_hash"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    task_ends(&team).await;
    team.shutdown().await;
}
