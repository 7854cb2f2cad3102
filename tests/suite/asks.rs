//! Structured questions end to end over REST (seed 001's Plan Ask): the manager asks alice a
//! choice, a form and a free question, each waiting for her answer; an answer that does not fit
//! is 422 and changes nothing; one that fits reaches the manager in its canonical form; the
//! fourth question in one stage is refused and the manager goes on without it.

use crate::support::api_team;
use crate::support::http;

use axum::Router;
use axum::http::StatusCode;
use cohort::actors::Team;
use cohort::api::router;
use http::{assert_error, get, post};
use serde_json::{Value, json};
use std::time::Duration;

/// alice's oldest unanswered question from the manager, once it carries `mode`.
async fn question(app: &Router, token: &str, mode: &str) -> Value {
    for _ in 0..400 {
        let r = get(app, "/api/human/alice/pending", token).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        if let Some(q) = r.body["pending"]
            .as_array()
            .and_then(|p| p.first())
            .filter(|q| q["ask"]["mode"] == mode)
        {
            return q.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let pending = get(app, "/api/human/alice/pending", token).await.text;
    let steps = get(app, "/api/states?type=step", token).await.text;
    panic!("no `{mode}` question reached alice: {pending}\n{steps}");
}

async fn answer(app: &Router, token: &str, task: &Value, content: &str) -> http::Reply {
    let body = json!({
        "human_agent_id": "alice", "task_id": task, "receiver": ["manager"],
        "content": content, "need_reply": false,
    });
    post(app, "/api/send_message", Some(token), body).await
}

/// The manager's step with this intention, once it is over.
async fn manager_step(team: &Team, intention: &str) -> Value {
    for _ in 0..400 {
        let done = team.monitor.read(|s| {
            s.steps()
                .find(|st| st.step_intention == intention && st.execution_state.is_over())
                .map(|st| serde_json::to_value(st).unwrap())
        });
        if let Some(st) = done {
            return st;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the manager's step `{intention}` never ended");
}

#[actix::test]
async fn a_person_answers_a_choice_a_form_and_a_question_and_the_fourth_is_refused() {
    let (team, cfg) = api_team::start_fixture("asks");
    let api = api_team::api(&team, &cfg);
    let app = router(api.clone());
    let alice = api_team::login(&api, "alice", api_team::ALICE_PASSWORD).await;
    let base = json!(team.base_task);
    let goal = answer(&app, &alice, &base, "Design a logo").await;
    assert_eq!(goal.status, StatusCode::OK, "{}", goal.text);

    // A choice: only one of its options is taken, in the option's own spelling.
    let q = question(&app, &alice, "select").await;
    assert_eq!(q["ask"]["options"], json!(["Red", "Blue", "Green"]));
    assert!(q["waiting"].as_bool().unwrap(), "a question always waits");
    let wrong = answer(&app, &alice, &base, "Purple").await;
    assert_error(&wrong, StatusCode::UNPROCESSABLE_ENTITY, "not an option");
    assert!(wrong.text.contains("Red | Blue | Green"), "{}", wrong.text);
    let still = question(&app, &alice, "select").await;
    assert_eq!(
        still["return_waiting_id"], q["return_waiting_id"],
        "a refused answer answers nothing"
    );
    let ok = answer(&app, &alice, &base, " blue ").await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    assert_eq!(ok.body["sent"][0]["message"], "Blue");
    assert_eq!(
        ok.body["sent"][0]["return_waiting_id"],
        q["return_waiting_id"]
    );

    // A form: typed fields, bounds and required fields are checked.
    let q = question(&app, &alice, "form").await;
    assert_eq!(q["ask"]["fields"][0]["key"], "width");
    for (bad, why) in [
        (r#"{"width": 4096}"#, "from 16 to 1024"),
        (r#"{"rounded": true}"#, "`width`: it is required"),
        ("a big one", "JSON object"),
    ] {
        let r = answer(&app, &alice, &base, bad).await;
        assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, bad);
        assert!(r.text.contains(why), "{bad}: {}", r.text);
    }
    let ok = answer(&app, &alice, &base, r#"{"width": "256", "rounded": "yes"}"#).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    let sent: Value =
        serde_json::from_str(ok.body["sent"][0]["message"].as_str().unwrap()).unwrap();
    assert_eq!(sent, json!({"width": 256, "rounded": true}));

    // Free text.
    question(&app, &alice, "text").await;
    let ok = answer(&app, &alice, &base, "Cohort").await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);

    // The fourth question of the stage is refused; asked again with that reason, the manager
    // goes on with a plain message.
    let fourth = manager_step(&team, "ask the font").await;
    assert_eq!(fourth["execution_state"], "finished", "{fourth:#}");
    let refused = &fourth["execute_result"]["reasked"][0]["error"];
    assert!(
        refused
            .as_str()
            .unwrap()
            .contains("no more questions in this stage: you asked 3 already"),
        "{fourth:#}"
    );
    assert!(fourth["execute_result"]["send_message"]["ask"].is_null());
    // Each answer reached the manager as the text it processed.
    let seen: Vec<String> = team.monitor.read(|s| {
        s.steps()
            .filter(|st| st.agent_id.as_str() == "manager")
            .map(|st| st.text_content.clone())
            .collect()
    });
    for want in ["Blue", r#""width":256"#, "Cohort"] {
        assert!(
            seen.iter().any(|t| t.contains(want)),
            "no step of the manager saw {want}: {seen:#?}"
        );
    }
    let mut chat = String::new();
    for _ in 0..400 {
        chat = get(&app, "/api/human/alice/conversations", &alice)
            .await
            .text;
        if chat.contains("I go on with a sans-serif font") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(chat.contains("I go on with a sans-serif font"), "{chat}");
    team.shutdown().await;
}
