//! A message that chooses its model and MCP servers (seed 004: message > agent > team), through
//! the REST API of a running team: the writer may be given the team's `strong` model, and a
//! message that chooses it is worked on by that model (its own script answers); a message
//! without a choice by the writer's own; a model or server the receiver may not be given is
//! refused with the reason, before anything is sent.

use crate::support::api_team::{ALICE_PASSWORD, api, eventually, login, start_fixture};
use crate::support::http::{assert_error, base_task, get, post};

use axum::http::StatusCode;
use cohort::api::router;
use serde_json::{Value, json};

/// The result of the writer's process_message step whose text holds `mark`, once it is over.
async fn answer_to(app: &axum::Router, token: &str, mark: &str) -> String {
    eventually(&format!("the writer's answer to {mark}"), || async {
        let steps = get(app, "/api/states?type=step", token).await.body;
        steps.as_object()?.values().find_map(|s: &Value| {
            let mine = s["agent_id"] == "writer"
                && s["executor"] == "process_message"
                && s["text_content"].as_str()?.contains(mark)
                && s["execution_state"] == "finished";
            mine.then(|| s["execute_result"].to_string())
        })
    })
    .await
}

#[actix::test]
async fn a_message_chooses_a_named_model_within_what_its_receiver_may_be_given() {
    let (team, cfg) = start_fixture("choice");
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let token = login(&state, "alice", ALICE_PASSWORD).await;
    let send = |to: &str, text: &str, choice: Value| {
        let mut body = json!({"human_agent_id": "alice", "task_id": base_task(&team),
            "receiver": [to], "content": text, "need_reply": false});
        body.as_object_mut()
            .unwrap()
            .extend(choice.as_object().unwrap().clone());
        body
    };

    // What each agent may be given is on its state.
    let agents = get(&app, "/api/states?type=agent", &token).await.body;
    assert_eq!(agents["writer"]["models"], json!(["strong"]));

    let r = post(
        &app,
        "/api/send_message",
        Some(&token),
        send("writer", "CHOICE# a", json!({"llm": "huge"})),
    )
    .await;
    assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "an unknown model");
    assert!(
        r.text
            .contains("`writer` cannot be given the model `huge` (its models: strong)"),
        "{}",
        r.text
    );
    let r = post(
        &app,
        "/api/send_message",
        Some(&token),
        send("manager", "CHOICE# a", json!({"llm": "strong"})),
    )
    .await;
    assert_error(
        &r,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a model the manager may not be given",
    );
    let r = post(
        &app,
        "/api/send_message",
        Some(&token),
        send("writer", "CHOICE# a", json!({"mcp_servers": ["web"]})),
    )
    .await;
    assert_error(
        &r,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a server the writer may not call",
    );
    assert!(
        r.text
            .contains("cannot call the MCP server `web` (its tools: none)"),
        "{}",
        r.text
    );

    let r = post(
        &app,
        "/api/send_message",
        Some(&token),
        send("writer", "CHOICE# strong one", json!({"llm": "strong"})),
    )
    .await;
    assert!(r.status.is_success(), "{}", r.text);
    let chosen = answer_to(&app, &token, "CHOICE# strong one").await;
    assert!(chosen.contains("Answered by the strong model."), "{chosen}");

    let r = post(
        &app,
        "/api/send_message",
        Some(&token),
        send("writer", "CHOICE# own one", json!({})),
    )
    .await;
    assert!(r.status.is_success(), "{}", r.text);
    let own = answer_to(&app, &token, "CHOICE# own one").await;
    assert!(own.contains("Answered by the writer's own model."), "{own}");
    team.shutdown().await;
}
