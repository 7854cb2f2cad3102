//! A server's question during a tool call (MCP elicitation), end to end: the clerk calls
//! server-everything's `trigger-elicitation-request` (npm, pinned by `.ci/run`), whose server
//! asks for a person's details mid-call. The step waits (`waiting_for_param`) with the form
//! the server sent; the operator sees it through REST and answers (or declines); the answer
//! reaches the server through the open call, and the step runs on to its end. Nobody
//! answering in time cancels the question, as MCP has a client answer one nobody took up.

use crate::support::mcp;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use cohort::actors::{Host, Team, start_team};
use cohort::api::{ApiState, router};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use mcp::scratch::Scratch;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tower::ServiceExt;

/// The test team in a folder of its own, its server file naming server-everything where
/// `.ci/run` put it; `human_secs` bounds a wait for the operator.
fn team_files(tag: &str, human_secs: u64) -> Scratch {
    let dir = mcp::temp_dir(&format!("elicitation-{tag}"));
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    let fixture = Path::new("tests/fixtures/elicitation");
    let team = std::fs::read_to_string(fixture.join("team.yaml")).unwrap();
    std::fs::write(
        dir.join("team.yaml"),
        format!("{team}\nwaits: {{human_secs: {human_secs}}}\n"),
    )
    .unwrap();
    std::fs::copy(fixture.join("script.yaml"), dir.join("script.yaml")).unwrap();
    let server = format!(
        "name: everything\ndescription: MCP's reference test server\ncommand: node\nargs: [{:?}, stdio]\n",
        mcp::everything_js().display().to_string()
    );
    std::fs::write(dir.join("servers/everything.yaml"), server).unwrap();
    dir
}

async fn started(dir: &Path) -> (Team, ApiState, String) {
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let api = ApiState::new(&team, &cfg.humans, None, vec![]);
    let login = json!({"human_agent_id": "operator", "password": "cohort-demo"});
    let (_, body) = call(&api, "POST", "/api/bind_human_agent", None, Some(login)).await;
    let token = body["token"].as_str().unwrap().to_owned();
    team.submit_goal(None, "Ask the person for their details")
        .await
        .unwrap();
    (team, api, token)
}

async fn call(
    api: &ApiState,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = req
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

/// The server's question, once it waits for the operator.
async fn question(api: &ApiState, token: &str) -> Value {
    for _ in 0..1200 {
        let (status, body) = call(api, "GET", "/api/approvals", Some(token), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if let Some(q) = body["approvals"].as_array().and_then(|a| a.first()) {
            return q.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the server's question never reached the operator");
}

/// The clerk's tool step once it has ended: its result's text.
async fn tool_result(team: &Team, step: &str) -> String {
    for _ in 0..1200 {
        let s = team.monitor.get(StateKind::Step, step).unwrap();
        if s["execution_state"] == "finished" {
            return s["execute_result"].to_string();
        }
        assert_ne!(s["execution_state"], "failed", "{s:#}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the tool step never ended");
}

#[actix::test]
async fn the_operator_answers_a_servers_question_and_the_call_goes_on_with_it() {
    let dir = team_files("answer", 600);
    let (team, api, token) = started(&dir).await;
    let q = question(&api, &token).await;
    assert_eq!(q["kind"], "elicitation", "{q:#}");
    assert_eq!(q["server"], "everything");
    assert_eq!(q["tool"], "trigger-elicitation-request");
    assert!(
        q["message"]
            .as_str()
            .unwrap()
            .contains("Please provide inputs")
    );
    let fields = q["form"]["fields"].as_array().unwrap();
    let field = |k: &str| fields.iter().find(|f| f["key"] == k).cloned();
    assert_eq!(field("name").unwrap()["required"], true);
    assert_eq!(field("integer").unwrap()["default"], 42);
    assert_eq!(field("untitledSingleSelectEnum").unwrap()["type"], "select");
    assert_eq!(
        field("titledSingleSelectEnum").unwrap()["options"][1],
        "hero-2"
    );
    assert!(
        field("untitledMultipleSelectEnum").is_none(),
        "a pick of several keeps its default"
    );
    let step = q["step_id"].as_str().unwrap().to_owned();
    let waiting = team.monitor.get(StateKind::Step, &step).unwrap();
    assert_eq!(waiting["execution_state"], "waiting_for_param");
    // The operator is told, with the server's message.
    let told = team.monitor.read(|s| {
        s.agents[&cohort::ids::AgentId::from("operator")]
            .conversation_pool
            .as_ref()
            .map(|p| format!("{p:?}"))
            .unwrap_or_default()
    });
    assert!(
        told.contains("A question from MCP server `everything`"),
        "{told}"
    );

    let uri = format!("/api/step/{step}/params");
    let bad = json!({"values": {"integer": 1000}});
    let (status, body) = call(&api, "POST", &uri, Some(&token), Some(bad)).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "name is required: {body}"
    );
    let values = json!({"values": {"name": "Ada Lovelace", "check": true, "integer": 7}});
    let (status, body) = call(&api, "POST", &uri, Some(&token), Some(values)).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let result = tool_result(&team, &step).await;
    assert!(
        result.contains("User provided the requested information"),
        "{result}"
    );
    assert!(result.contains("Name: Ada Lovelace"), "{result}");
    assert!(result.contains("Favorite Integer: 7"), "{result}");
    // What the person left empty took the form's defaults.
    assert!(result.contains("Favorite Number: 3.14"), "{result}");
    team.shutdown().await;
}

#[actix::test]
async fn a_declined_question_and_one_nobody_answers_reach_the_server_as_mcp_says() {
    let dir = team_files("decline", 600);
    let (team, api, token) = started(&dir).await;
    let q = question(&api, &token).await;
    let step = q["step_id"].as_str().unwrap().to_owned();
    let uri = format!("/api/step/{step}/reject");
    let no = json!({"reason": "not today"});
    let (status, body) = call(&api, "POST", &uri, Some(&token), Some(no)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = tool_result(&team, &step).await;
    assert!(result.contains("User declined"), "{result}");
    team.shutdown().await;

    // Nobody answers within human_secs: the question is cancelled and the call goes on.
    let dir = team_files("overdue", 1);
    let (team, api, token) = started(&dir).await;
    let q = question(&api, &token).await;
    let step = q["step_id"].as_str().unwrap().to_owned();
    let result = tool_result(&team, &step).await;
    assert!(result.contains("User cancelled"), "{result}");
    let (_, left) = call(&api, "GET", "/api/approvals", Some(&token), None).await;
    assert_eq!(left["approvals"], json!([]), "nothing waits any more");
    team.shutdown().await;
}
