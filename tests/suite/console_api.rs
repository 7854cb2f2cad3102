//! The web console's files and a step's LLM calls through the real REST router: the console
//! built into the binary, one served from a folder (never escaping it), and the prompt and raw
//! reply of a step's calls (operators only).

use crate::support::api_team;
use crate::support::http;

use api_team::scratch::Scratch;
use api_team::*;
use axum::http::{StatusCode, header};
use cohort::api::{ApiState, router};
use cohort::state::StepExecutionState;
use http::*;

fn content_type(r: &Reply) -> &str {
    r.headers[header::CONTENT_TYPE].to_str().unwrap()
}

/// Without `--web`, the console built into the binary is served: an installed `cohort` needs
/// no source tree.
#[actix::test]
async fn the_built_in_console_is_served_without_a_web_dir() {
    let (team, cfg) = start();
    let app = router(ApiState::new(&team, &cfg.humans, None, vec![]));
    let r = call(&app, "GET", "/", None, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text, include_str!("../../web/index.html"));
    let r = call(&app, "GET", "/app.js", None, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(content_type(&r).contains("javascript"));
    let r = call(&app, "GET", "/no-such.js", None, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[actix::test]
async fn the_console_is_served_from_web_dir_without_escaping_it() {
    let (team, cfg) = start();
    let root = Scratch::new("api-web");
    let dir = root.join("web");
    std::fs::create_dir_all(dir.join("js")).unwrap();
    std::fs::write(root.join("secret.txt"), "TOP SECRET").unwrap();
    std::fs::write(dir.join("index.html"), "<h1>Cohort</h1>").unwrap();
    std::fs::write(dir.join("js/app.js"), "console.log(1)").unwrap();
    let app = router(ApiState::new(&team, &cfg.humans, Some(dir.clone()), vec![]));
    let r = call(&app, "GET", "/", None, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text, "<h1>Cohort</h1>");
    assert!(content_type(&r).starts_with("text/html"));
    let r = call(&app, "GET", "/js/app.js", None, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(content_type(&r).contains("javascript"));
    for escape in [
        "/../secret.txt",
        "/js/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/js/%2e%2e/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
    ] {
        let r = call(&app, "GET", escape, None, None).await;
        assert!(r.status.is_client_error(), "{escape}: {}", r.status);
        assert!(
            !r.text.contains("TOP SECRET"),
            "{escape} escaped the web dir"
        );
    }
    // The API is not shadowed by the console.
    let r = call(&app, "GET", "/api/states?type=task", None, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
}

/// A step's LLM calls, as sent and answered, are readable through REST: the prompt the model
/// got (system and user message) and its raw reply.
#[actix::test]
async fn a_steps_llm_calls_are_readable_with_prompt_and_raw_reply() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    team.submit_goal(None, "Design a logo").await.unwrap();
    let step = eventually("the goal's decision step to finish", || async {
        team.monitor.read(|s| {
            s.steps()
                .find(|st| {
                    st.executor.name() == "decision"
                        && st.execution_state == StepExecutionState::Finished
                })
                .map(|st| st.step_id.to_string())
        })
    })
    .await;
    let r = get(&app, &format!("/api/step/{step}/calls"), &alice).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let calls = r.body["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{}", r.text);
    assert!(
        calls[0]["prompt"]
            .as_str()
            .unwrap()
            .contains("Design a logo")
    );
    assert!(!calls[0]["system"].as_str().unwrap().is_empty());
    assert!(
        calls[0]["reply"]
            .as_str()
            .unwrap()
            .starts_with("<planned_step>")
    );
    assert!(calls[0]["answered_at"].as_i64() >= calls[0]["sent_at"].as_i64());
    let r = get(&app, "/api/step/no-such-step/calls", &alice).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // A prompt carries the agent's memory and other work: a member never reads one, not even
    // of a step in the base task they are part of.
    let bob = login(&state, "bob", BOB_PASSWORD).await;
    let r = get(&app, &format!("/api/step/{step}/calls"), &bob).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
}
