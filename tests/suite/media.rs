//! Images a tool returns (MCP `image` content), end to end: server-everything's
//! `get-tiny-image` in a clerk's native tool loop. The image leaves the result as a reference
//! to a blob (no base64 in the step or in a prompt), the model is sent the picture as an
//! `image_url` part when its config says `multimodal: true` and only told of it otherwise,
//! and `GET /api/blob/{id}` serves the bytes with their MIME type to a person signed in.

use crate::support::competent;
use crate::support::mcp;
use crate::support::openai_stub;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine;
use cohort::actors::{Host, Team, start_team};
use cohort::api::{ApiState, router};
use cohort::call::media::BlobId;
use cohort::config::load_team;
use cohort::monitor::StateKind;
use mcp::scratch::Scratch;
use openai_stub::{OpenAiStub, RecordedRequest, StubResponse};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tower::ServiceExt;

const PASSWORD_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$jUcQy16DUfKKGV/lL6/6jw$aSPXFXbbjz70sKV8AbvLk3wWNpKjUlg5S0r0DZiRjNI";

/// A clerk whose model calls server-everything's tools itself; `multimodal` as its config says.
fn team_files(tag: &str, llm: &str, multimodal: bool) -> Scratch {
    let dir = mcp::temp_dir(&format!("media-{tag}"));
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    let server = format!(
        "name: everything\ndescription: MCP's reference test server\ncommand: node\nargs: [{:?}, stdio]\n",
        mcp::everything_js().display().to_string()
    );
    std::fs::write(dir.join("servers/everything.yaml"), server).unwrap();
    std::fs::write(
        dir.join("team.yaml"),
        format!(
            "mcp_servers: servers\n\
             llm: {{provider: openai, base_url: '{llm}', model: m, tool_calling: native, multimodal: {multimodal}}}\n\
             humans:\n\
             \x20 - {{id: operator, access: operator, password_hash: '{PASSWORD_HASH}'}}\n\
             tool_approval: {{auto_run_up_to: high}}\n\
             agents:\n\
             \x20 - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: clerk, role: clerk, skills: [planning, reflection, summary, think, instruction_generation, tool_decision], tools: [everything]}}\n"
        ),
    )
    .unwrap();
    dir
}

/// The competent stub, the clerk planning one step whose loop asks for the tiny image, then
/// answers.
fn answer(req: &RecordedRequest) -> StubResponse {
    if req.body.get("tools").is_some() {
        let called = req.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool");
        if called {
            return StubResponse::reply_with_usage("It is the MCP logo.", 50, 10);
        }
        let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "call0", "type": "function",
            "function": {"name": "get-tiny-image", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}});
        return StubResponse::raw(200, body.to_string());
    }
    if req.body["response_format"]["json_schema"]["name"] == "planning" {
        let plan = json!({"planned_step": [
            {"step_intention": "Look at the logo", "type": "tool", "executor": "everything", "text_content": "Get the tiny image and say what it shows."},
            {"step_intention": "Check the goal", "type": "skill", "executor": "reflection", "text_content": "done?"}]});
        return StubResponse::reply_with_usage(&plan.to_string(), 50, 10);
    }
    StubResponse::reply_with_usage(&competent::competent(req), 50, 10)
}

async fn started(tag: &str, multimodal: bool) -> (Team, OpenAiStub, Scratch) {
    let stub = OpenAiStub::start().await;
    stub.set_fallback(answer);
    let dir = team_files(tag, &stub.base_url(), multimodal);
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "Please reach GOAL<logo>.")
        .await
        .unwrap();
    (team, stub, dir)
}

/// The loop's request after the call: the one whose messages hold the tool's result.
async fn after_the_call(stub: &OpenAiStub) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = stub.requests().into_iter().find(|r| {
            r.body.get("tools").is_some()
                && r.body["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["role"] == "tool")
        });
        if let Some(r) = found {
            return r.body;
        }
        assert!(
            Instant::now() < deadline,
            "the loop never asked again after the call"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The call's step (the loop records one per call) once it is in: its result.
async fn call_result(team: &Team) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let steps = team.monitor.snapshot(StateKind::Step);
        let call = steps.values().find(|s| {
            s["executor"] == "everything" && s["execute_result"].to_string().contains("\"image\"")
        });
        if let Some(s) = call {
            return s["execute_result"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "no step holds the image's reference"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The image server-everything returns, as its bytes.
fn tiny_image() -> Vec<u8> {
    let js = mcp::everything_js()
        .parent()
        .unwrap()
        .join("tools/get-tiny-image.js");
    let text = std::fs::read_to_string(js).unwrap();
    let data = text.split('"').nth(1).unwrap();
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap()
}

async fn get(api: &ApiState, uri: &str, token: Option<&str>) -> (StatusCode, String, Vec<u8>) {
    let mut req = Request::builder().uri(uri);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let res = router(api.clone())
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let mime = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, mime, bytes.to_vec())
}

async fn token(api: &ApiState) -> String {
    let login = json!({"human_agent_id": "operator", "password": "cohort-demo"});
    let req = Request::builder()
        .method("POST")
        .uri("/api/bind_human_agent")
        .header("content-type", "application/json")
        .body(Body::from(login.to_string()))
        .unwrap();
    let res = router(api.clone()).oneshot(req).await.unwrap();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    body["token"].as_str().unwrap().to_owned()
}

#[actix::test]
async fn a_tools_image_reaches_a_multimodal_model_as_a_picture_and_a_person_through_the_api() {
    let (team, stub, dir) = started("multimodal", true).await;
    let png = tiny_image();
    let id = BlobId::of(&png);

    let result = call_result(&team).await;
    let text = result.to_string();
    assert!(
        text.contains(id.as_str()),
        "the result refers to the blob: {text}"
    );
    assert!(
        !text.contains("iVBORw0KGgo"),
        "no base64 left in the step: {text}"
    );
    assert!(text.contains("image/png"), "{text}");

    let asked = after_the_call(&stub).await;
    let user = asked["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    let parts = user["content"]
        .as_array()
        .expect("the prompt came with parts");
    assert_eq!(parts[0]["type"], "text");
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    assert_eq!(parts[1]["type"], "image_url", "{parts:?}");
    assert_eq!(parts[1]["image_url"]["url"], url.as_str());
    let tool = asked["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        !tool["content"].as_str().unwrap().contains("iVBORw0KGgo"),
        "the tool's message tells of the image, without its bytes"
    );

    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let api = ApiState::new(&team, &cfg.humans, None, vec![]);
    let token = token(&api).await;
    let uri = format!("/api/blob/{id}");
    let (status, mime, bytes) = get(&api, &uri, Some(&token)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(mime, "image/png");
    assert_eq!(bytes, png, "the image's own bytes");
    let (status, _, _) = get(&api, &uri, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "only a person signed in");
    let other = format!("/api/blob/{}", BlobId::of(b"never kept"));
    let (status, _, body) = get(&api, &other, Some(&token)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(String::from_utf8_lossy(&body).contains("no image or sound"));
    let (status, _, _) = get(&api, "/api/blob/..%2Fetc", Some(&token)).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "not an id: nothing is looked up"
    );
    team.shutdown().await;
}

#[actix::test]
async fn a_model_that_takes_no_images_is_told_of_them_in_words() {
    let (team, stub, _dir) = started("text", false).await;
    let asked = after_the_call(&stub).await;
    for r in stub.requests() {
        assert!(
            !r.raw_body.contains("iVBORw0KGgo"),
            "no image bytes to this model"
        );
        assert!(
            !r.raw_body.contains("image_url"),
            "no picture to this model"
        );
    }
    let tool = asked["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let told = tool["content"].as_str().unwrap();
    assert!(
        told.contains("[image: image/png, "),
        "the model is told what came back: {told}"
    );
    team.shutdown().await;
}
