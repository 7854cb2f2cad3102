//! The REST API through the real router (tower `oneshot`) over a running team: tokens on
//! every protected route, one human never acting as another, login and its rate limit,
//! malformed requests, the states API, and a waiting question answered by a person (who may
//! see what: tests/suite/access.rs).

use crate::support::api_team;
use crate::support::http;

use api_team::*;
use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{Request, StatusCode, header};
use cohort::actors::GetAgentState;
use cohort::api::{ApiState, BODY_LIMIT, LoginLimits, PROTECTED_ROUTES, router};
use cohort::state::{Skill, StepExecutionState};
use http::*;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;
use tower::ServiceExt;

#[actix::test]
async fn every_protected_route_refuses_requests_without_a_valid_token() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let body = json!({"human_agent_id": "alice", "task_id": base_task(&team),
        "receiver": ["manager"], "content": "hi"});
    assert!(PROTECTED_ROUTES.len() >= 5);
    for route in PROTECTED_ROUTES {
        let what = format!("{} {}", route.method, route.example);
        let payload = (route.method == "POST").then(|| body.to_string());
        for token in [None, Some("not-a-token"), Some("")] {
            let r = call(&app, route.method, route.example, token, payload.clone()).await;
            assert_error(
                &r,
                StatusCode::UNAUTHORIZED,
                &format!("{what} with {token:?}"),
            );
        }
        // The example really is the route: with a good token it is neither refused nor missing
        // (a verdict on a step that does not exist is answered by the route itself).
        let r = call(&app, route.method, route.example, Some(&alice), payload).await;
        // An upload is kept in the team's store, which this team runs without: the route
        // itself says so.
        let needs_store = r.status == StatusCode::CONFLICT && r.text.contains("without a store");
        assert!(
            r.status.is_success() || route.example.contains("/no-such-") || needs_store,
            "{what} with a valid token: {} {}",
            r.status,
            r.text
        );
        assert!(
            r.status != StatusCode::UNAUTHORIZED && !r.text.contains("no such route"),
            "{what} with a valid token: {} {}",
            r.status,
            r.text
        );
    }
    // A token in the wrong scheme is no token.
    let req = Request::get("/api/states?type=task")
        .header(header::AUTHORIZATION, format!("Basic {alice}"))
        .body(Body::empty())
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}

#[actix::test]
async fn a_path_that_names_no_route_is_answered_with_the_routes_there_are() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let r = get(&app, "/api/tasks", &alice).await;
    assert_error(&r, StatusCode::NOT_FOUND, "a guessed path");
    for said in [
        "GET /api/tasks",
        "GET /api/states",
        "POST /api/send_message",
    ] {
        assert!(r.text.contains(said), "{said} missing from {}", r.text);
    }
}

#[actix::test]
async fn a_token_for_one_human_cannot_act_as_another() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let bob = login(&state, "bob", BOB_PASSWORD).await;
    for path in ["/api/human/alice/pending", "/api/human/alice/conversations"] {
        assert_error(&get(&app, path, &bob).await, StatusCode::FORBIDDEN, path);
    }
    let as_alice = json!({"human_agent_id": "alice", "task_id": base_task(&team),
        "receiver": ["manager"], "content": "Pretending to be alice"});
    let r = post(&app, "/api/send_message", Some(&bob), as_alice).await;
    assert_error(&r, StatusCode::FORBIDDEN, "send as alice with bob's token");
    // Nothing was sent in alice's name.
    let alice_state = team.agents[&"alice".into()]
        .send(GetAgentState)
        .await
        .unwrap();
    assert!(alice_state.agent_step.steps().is_empty());
    // Bob's own routes work.
    assert_eq!(
        get(&app, "/api/human/bob/pending", &bob).await.status,
        StatusCode::OK
    );
}

#[actix::test]
async fn login_gives_a_token_for_the_right_password_only() {
    let (team, cfg) = start();
    let app = router(api(&team, &cfg));
    let good = json!({"human_agent_id": "alice", "password": ALICE_PASSWORD});
    let r = post(&app, "/api/bind_human_agent", None, good).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["success"], true);
    assert_eq!(r.body["human_agent_id"], "alice");
    let token = r.body["token"].as_str().unwrap();
    assert!(token.len() >= 32, "at least 128 bits");
    assert_eq!(
        get(&app, "/api/human/alice/pending", token).await.status,
        StatusCode::OK
    );
    // A second login is a second session; logging out ends only the one it is sent with.
    let again = post(
        &app,
        "/api/bind_human_agent",
        None,
        json!({"human_agent_id": "alice", "password": ALICE_PASSWORD}),
    )
    .await;
    let other = again.body["token"].as_str().unwrap();
    let out = post(&app, "/api/logout", Some(token), json!({})).await;
    assert_eq!(out.status, StatusCode::OK, "{}", out.text);
    assert_error(
        &get(&app, "/api/human/alice/pending", token).await,
        StatusCode::UNAUTHORIZED,
        "a token after logout",
    );
    assert_eq!(
        get(&app, "/api/human/alice/pending", other).await.status,
        StatusCode::OK
    );

    let wrong = post(
        &app,
        "/api/bind_human_agent",
        None,
        json!({"human_agent_id": "alice", "password": BOB_PASSWORD}),
    )
    .await;
    assert_error(&wrong, StatusCode::UNAUTHORIZED, "wrong password");
    assert_eq!(wrong.body["success"], false);
    assert!(wrong.body.get("token").is_none());
    let unknown = post(
        &app,
        "/api/bind_human_agent",
        None,
        json!({"human_agent_id": "mallory", "password": ALICE_PASSWORD}),
    )
    .await;
    assert_error(&unknown, StatusCode::UNAUTHORIZED, "unknown human");
    assert_eq!(
        wrong.body, unknown.body,
        "an unknown id and a wrong password look the same"
    );
    // An LLM agent is not a person and cannot log in.
    let agent = post(
        &app,
        "/api/bind_human_agent",
        None,
        json!({"human_agent_id": "manager", "password": ""}),
    )
    .await;
    assert_error(&agent, StatusCode::UNAUTHORIZED, "an LLM agent");
}

fn limited(state: ApiState) -> ApiState {
    state.with_login_limits(LoginLimits {
        free_per_pair: 3,
        free_per_ip: 4,
        first_delay: Duration::from_secs(20),
        ..LoginLimits::default()
    })
}

#[actix::test]
async fn a_guesser_is_slowed_down_but_cannot_lock_the_person_out() {
    let (team, cfg) = start();
    let state = limited(api(&team, &cfg));
    let from = |ip: &str| {
        router(state.clone()).layer(MockConnectInfo(
            format!("{ip}:40000").parse::<SocketAddr>().unwrap(),
        ))
    };
    let guesser = from("10.0.0.66");
    let bind = |human: &str, password: &str| json!({"human_agent_id": human, "password": password});
    for i in 0..3 {
        let r = post(
            &guesser,
            "/api/bind_human_agent",
            None,
            bind("alice", "guess"),
        )
        .await;
        assert_error(&r, StatusCode::UNAUTHORIZED, &format!("failure {i}"));
    }
    // From the guesser's address even the right password now waits, with a hint when to retry.
    let r = post(
        &guesser,
        "/api/bind_human_agent",
        None,
        bind("alice", ALICE_PASSWORD),
    )
    .await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, "fourth attempt");
    let retry: u64 = r.headers[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "Retry-After {retry}");
    // Alice, from her own address, is not held back by someone else's guesses.
    let r = post(
        &from("10.0.0.7"),
        "/api/bind_human_agent",
        None,
        bind("alice", ALICE_PASSWORD),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

#[actix::test]
async fn failed_logins_are_rate_limited_per_client_ip() {
    let (team, cfg) = start();
    let state = limited(api(&team, &cfg));
    let from = |ip: &str| {
        router(state.clone()).layer(MockConnectInfo(
            format!("{ip}:40000").parse::<SocketAddr>().unwrap(),
        ))
    };
    let guesser = from("10.0.0.66");
    // Spread over several ids, so only the per-IP limit can trip.
    for id in ["u1", "u2", "u3", "u4"] {
        let r = post(
            &guesser,
            "/api/bind_human_agent",
            None,
            json!({"human_agent_id": id, "password": "guess"}),
        )
        .await;
        assert_error(&r, StatusCode::UNAUTHORIZED, id);
    }
    let r = post(
        &guesser,
        "/api/bind_human_agent",
        None,
        json!({"human_agent_id": "bob", "password": BOB_PASSWORD}),
    )
    .await;
    assert_error(
        &r,
        StatusCode::TOO_MANY_REQUESTS,
        "fifth attempt from one IP",
    );
    assert!(r.headers.contains_key(header::RETRY_AFTER));
    // Another client still gets in.
    let r = post(
        &from("10.0.0.7"),
        "/api/bind_human_agent",
        None,
        json!({"human_agent_id": "bob", "password": BOB_PASSWORD}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

#[actix::test]
async fn malformed_requests_get_a_4xx_with_a_reason_and_never_break_the_server() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let task = base_task(&team);
    let huge = format!(
        r#"{{"human_agent_id": "alice", "password": "{}"}}"#,
        "x".repeat(BODY_LIMIT + 1)
    );
    let raw = |uri: &'static str, token: Option<&'static str>, body: String| (uri, token, body);
    let login_cases = [
        (
            "not JSON",
            raw("/api/bind_human_agent", None, "not json".into()),
        ),
        (
            "truncated JSON",
            raw(
                "/api/bind_human_agent",
                None,
                r#"{"human_agent_id": "#.into(),
            ),
        ),
        (
            "wrong types",
            raw(
                "/api/bind_human_agent",
                None,
                r#"{"human_agent_id": 5, "password": true}"#.into(),
            ),
        ),
        (
            "missing fields",
            raw("/api/bind_human_agent", None, "{}".into()),
        ),
        ("an array", raw("/api/bind_human_agent", None, "[]".into())),
        (
            "too large",
            raw("/api/bind_human_agent", None, huge.clone()),
        ),
    ];
    for (what, (uri, token, body)) in login_cases {
        let r = call(&app, "POST", uri, token, Some(body)).await;
        assert!(
            r.status.is_client_error(),
            "{what}: {} {}",
            r.status,
            r.text
        );
        assert!(r.body["error"].is_string(), "{what}: {}", r.text);
    }
    let send_cases: Vec<(&str, String, StatusCode)> = vec![
        ("not JSON", "{{{".into(), StatusCode::BAD_REQUEST),
        ("missing fields", r#"{"human_agent_id": "alice"}"#.into(), StatusCode::UNPROCESSABLE_ENTITY),
        (
            "receiver not a list",
            json!({"human_agent_id": "alice", "task_id": task, "receiver": "manager", "content": "x"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "content null",
            json!({"human_agent_id": "alice", "task_id": task, "receiver": ["manager"], "content": null}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "waiting not a bool",
            json!({"human_agent_id": "alice", "task_id": task, "receiver": ["manager"], "content": "x", "waiting": "yes"}).to_string(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "too large",
            json!({"human_agent_id": "alice", "task_id": task, "receiver": ["manager"], "content": "x".repeat(BODY_LIMIT)}).to_string(),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            "empty content",
            json!({"human_agent_id": "alice", "task_id": task, "receiver": ["manager"], "content": "  "}).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "no receiver",
            json!({"human_agent_id": "alice", "task_id": task, "receiver": [], "content": "x"}).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "to oneself",
            json!({"human_agent_id": "alice", "task_id": task, "receiver": ["alice"], "content": "x"}).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "unknown receiver",
            json!({"human_agent_id": "alice", "task_id": task, "receiver": ["nobody"], "content": "x"}).to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "unknown task",
            json!({"human_agent_id": "alice", "task_id": "no-such-task", "receiver": ["manager"], "content": "x"}).to_string(),
            StatusCode::NOT_FOUND,
        ),
    ];
    for (what, body, status) in send_cases {
        let r = call(&app, "POST", "/api/send_message", Some(&alice), Some(body)).await;
        assert_error(&r, status, what);
    }
    // No content type.
    let req = Request::post("/api/bind_human_agent")
        .body(Body::from(
            r#"{"human_agent_id": "alice", "password": "x"}"#,
        ))
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // Bad query strings and unknown routes.
    for (uri, status) in [
        ("/api/states", StatusCode::BAD_REQUEST),
        ("/api/states?type=planet", StatusCode::BAD_REQUEST),
        ("/api/states?type=", StatusCode::BAD_REQUEST),
        ("/api/state/no-such-id", StatusCode::NOT_FOUND),
        ("/api/no/such/route", StatusCode::NOT_FOUND),
    ] {
        assert_error(&get(&app, uri, &alice).await, status, uri);
    }
    // Nothing was sent, nothing marked, and the server still answers.
    let alice_state = team.agents[&"alice".into()]
        .send(GetAgentState)
        .await
        .unwrap();
    assert!(alice_state.agent_step.steps().is_empty());
    assert_eq!(
        get(&app, "/api/states?type=agent", &alice).await.status,
        StatusCode::OK
    );
}

#[actix::test]
async fn states_and_state_read_the_monitor() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let agents = get(&app, "/api/states?type=agent", &alice).await;
    assert_eq!(agents.status, StatusCode::OK);
    let ids: Vec<&String> = agents.body.as_object().unwrap().keys().collect();
    assert_eq!(ids, ["alice", "bob", "manager"]);
    assert_eq!(agents.body["manager"]["role"], "manager");
    assert!(
        agents.body["alice"]["conversation_pool"].is_null(),
        "private chats are not published to every observer"
    );
    let tasks = get(&app, "/api/states?type=task", &alice).await;
    let base = base_task(&team);
    assert_eq!(tasks.body[&base]["task_name"], "MAS base task");
    for kind in ["stage", "step"] {
        let r = get(&app, &format!("/api/states?type={kind}"), &alice).await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.body.is_object(), "{kind}: {}", r.text);
    }
    let one = get(&app, "/api/state/manager", &alice).await;
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(one.body["kind"], "agent");
    assert_eq!(one.body["state"]["agent_id"], "manager");
    let one = get(&app, &format!("/api/state/{base}"), &alice).await;
    assert_eq!(one.body["kind"], "task");
    assert_eq!(one.body["state"]["task_id"], base.as_str());
}

#[actix::test]
async fn states_come_a_page_at_a_time_in_id_order() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let page = get(&app, "/api/states?type=agent&limit=2", &alice).await;
    assert_eq!(page.status, StatusCode::OK);
    let ids: Vec<&String> = page.body.as_object().unwrap().keys().collect();
    assert_eq!(ids, ["alice", "bob"]);
    assert_eq!(page.headers["x-cohort-total"], "3");
    assert_eq!(page.headers["x-cohort-next-after"], "bob");
    let rest = get(&app, "/api/states?type=agent&limit=2&after=bob", &alice).await;
    let ids: Vec<&String> = rest.body.as_object().unwrap().keys().collect();
    assert_eq!(ids, ["manager"]);
    assert!(
        !rest.headers.contains_key("x-cohort-next-after"),
        "the last page"
    );
    // By task: the base task's group is every agent here; an unknown task has nothing.
    let base = base_task(&team);
    let in_base = get(&app, &format!("/api/states?type=task&task={base}"), &alice).await;
    assert_eq!(in_base.body.as_object().unwrap().len(), 1);
    let none = get(&app, "/api/states?type=agent&task=nope", &alice).await;
    assert!(none.body.as_object().unwrap().is_empty());
    for bad in ["limit=0", "limit=100000"] {
        let r = get(&app, &format!("/api/states?type=agent&{bad}"), &alice).await;
        assert_error(&r, StatusCode::BAD_REQUEST, bad);
    }
}

#[actix::test]
async fn a_task_list_gives_pools_sizes_one_task_in_full_gives_its_pools_and_pages_hold_to_bytes() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let base = base_task(&team);
    for n in 0..3 {
        let m = json!({"human_agent_id": "alice", "task_id": base, "receiver": ["manager"],
            "content": format!("note {n}: {}", "x".repeat(2000)), "need_reply": false});
        assert_eq!(
            post(&app, "/api/send_message", Some(&alice), m)
                .await
                .status,
            StatusCode::OK
        );
    }
    let list = get(&app, "/api/states?type=task", &alice).await;
    let t = &list.body[&base];
    assert!(t.get("shared_conversation_pool").is_none(), "{t}");
    assert!(t["conversation_count"].as_u64().unwrap() >= 3, "{t}");
    let full = get(
        &app,
        &format!("/api/states?type=task&task={base}&full=true"),
        &alice,
    )
    .await;
    let pool = full.body[&base]["shared_conversation_pool"]
        .as_array()
        .unwrap();
    assert!(pool.len() >= 3);
    let one = get(&app, &format!("/api/state/{base}"), &alice).await;
    assert_eq!(one.body["state"]["shared_conversation_pool"], json!(pool));
    let r = get(&app, "/api/states?type=task&full=true", &alice).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "full");
    // Steps carry the messages: a page of at most 1 KB holds one state, and says where to go on.
    let steps = get(&app, "/api/states?type=step&max_bytes=1024", &alice).await;
    assert_eq!(steps.status, StatusCode::OK);
    assert_eq!(steps.body.as_object().unwrap().len(), 1, "{}", steps.text);
    assert!(steps.headers.contains_key("x-cohort-next-after"));
    let r = get(&app, "/api/states?type=step&max_bytes=10", &alice).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "max_bytes");
    let r = get(&app, "/api/states?type=task&colour=red", &alice).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "colour");
}

#[actix::test]
async fn a_message_over_the_size_limit_is_refused_with_413_and_nothing_is_sent() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let limit = team.retention.message_chars;
    let big = json!({"human_agent_id": "alice", "task_id": base_task(&team),
        "receiver": ["manager"], "content": "x".repeat(limit + 1)});
    let r = post(&app, "/api/send_message", Some(&alice), big).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, "an oversized message");
    assert!(r.text.contains("retention.message_chars"), "{}", r.text);
    let alice_state = team.agents[&"alice".into()]
        .send(GetAgentState)
        .await
        .unwrap();
    assert!(
        alice_state.agent_step.steps().is_empty(),
        "nothing was recorded"
    );
    let fits = json!({"human_agent_id": "alice", "task_id": base_task(&team),
        "receiver": ["manager"], "content": "x".repeat(limit)});
    let r = post(&app, "/api/send_message", Some(&alice), fits).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

#[actix::test]
async fn a_waiting_question_is_answered_through_the_api_and_frees_the_manager() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let manager = team.agents[&"manager".into()].clone();
    team.submit_goal(None, "Design a logo").await.unwrap();

    // The manager asks alice and waits.
    let pending = eventually("alice's pending question", || async {
        let r = get(&app, "/api/human/alice/pending", &alice).await;
        let list = r.body["pending"].as_array()?.clone();
        (!list.is_empty()).then_some(list)
    })
    .await;
    assert_eq!(pending.len(), 1);
    let q = &pending[0];
    assert_eq!(q["sender_id"], "manager");
    assert_eq!(q["content"], "Which colour should the logo be?");
    assert_eq!(q["waiting"], true);
    let wait_id = q["return_waiting_id"].as_str().unwrap().to_owned();
    let held = manager.send(GetAgentState).await.unwrap();
    assert!(
        held.step_lock.ids().any(|w| w.as_str() == wait_id),
        "the manager holds the wait id alice sees"
    );

    // Alice answers, from a client that traces its calls (a W3C `traceparent` header); the
    // answer carries the wait id by itself.
    let answer = json!({"human_agent_id": "alice", "task_id": q["task_id"],
        "receiver": ["manager"], "content": "Blue, please.", "need_reply": false});
    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let req = Request::post("/api/send_message")
        .header(header::AUTHORIZATION, format!("Bearer {alice}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header("traceparent", TP)
        .body(Body::from(answer.to_string()))
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["success"], true);
    let sent = body["sent"].as_array().unwrap();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0]["traceparent"], TP,
        "the message travels in the caller's trace"
    );
    assert_eq!(sent[0]["return_waiting_id"], wait_id.as_str());
    assert_eq!(sent[0]["receiver"], json!(["manager"]));
    let r = get(&app, "/api/human/alice/pending", &alice).await;
    assert_eq!(
        r.body["pending"],
        json!([]),
        "answered questions are not pending"
    );
    let convo = get(&app, "/api/human/alice/conversations", &alice).await;
    let with_manager = convo.body["conversation_privates"]["manager"]
        .as_array()
        .unwrap();
    assert_eq!(with_manager.len(), 2);
    assert_eq!(with_manager[0]["replied"], true);
    assert_eq!(with_manager[1]["content"], "Blue, please.");

    // The manager's lock is released and it digests the answer.
    let done = eventually("the manager to digest the answer", || async {
        let s = manager.send(GetAgentState).await.ok()?;
        let digested = s.agent_step.steps().iter().any(|st| {
            st.executor.name() == Skill::ProcessMessage.name()
                && st.text_content.contains("Blue, please.")
                && st.execution_state == StepExecutionState::Finished
                && st.caused_by.map(|c| c.to_string()).as_deref() == Some(TP)
        });
        let idle = s.agent_step.todo_len() == 0 && s.agent_step.running().is_none();
        (s.step_lock.is_empty() && digested && idle).then_some(s)
    })
    .await;
    assert!(
        done.agent_step
            .steps()
            .iter()
            .all(|st| st.execution_state == StepExecutionState::Finished),
        "{:#?}",
        done.agent_step
            .steps()
            .iter()
            .filter(|st| st.execution_state != StepExecutionState::Finished)
            .map(|st| (&st.step_intention, &st.text_content, &st.execute_result))
            .collect::<Vec<_>>()
    );
    // The monitor saw the release too.
    let seen = get(&app, "/api/state/manager", &alice).await;
    assert_eq!(seen.body["state"]["step_lock"], json!([]));
}

#[actix::test]
async fn a_body_with_an_unknown_field_is_refused_naming_the_field() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    // A misspelt `need_reply` used to be ignored, sending with `need_reply: true`.
    let typo = json!({"human_agent_id": "alice", "task_id": base_task(&team),
        "receiver": ["manager"], "content": "hi", "need_replay": false});
    let r = post(&app, "/api/send_message", Some(&alice), typo).await;
    assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "need_replay");
    assert!(r.text.contains("need_replay"), "{}", r.text);
    let alice_state = team.agents[&"alice".into()]
        .send(GetAgentState)
        .await
        .unwrap();
    assert!(
        alice_state.agent_step.steps().is_empty(),
        "nothing was sent"
    );
    let extra = json!({"human_agent_id": "alice", "password": ALICE_PASSWORD, "remember": true});
    let r = post(&app, "/api/bind_human_agent", None, extra).await;
    assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "remember");
    assert!(r.text.contains("remember"), "{}", r.text);
    let r = post(
        &app,
        "/api/task/no-such-task/cancel",
        Some(&alice),
        json!({"reason": "x", "force": true}),
    )
    .await;
    assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "force");
    assert!(r.text.contains("force"), "{}", r.text);
    let stages = json!({"plan_hash": "h", "stages": [{"stage_intention": "x",
        "agent_allocation": {}, "agents": []}]});
    let r = post(&app, "/api/step/no-such-step/approve", Some(&alice), stages).await;
    assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "agents");
    assert!(r.text.contains("agents"), "{}", r.text);
}

#[actix::test]
async fn a_wrong_method_is_answered_with_the_json_error_and_the_allowed_methods() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    for (method, uri, token, allowed) in [
        ("GET", "/api/bind_human_agent", None, "POST"),
        ("DELETE", "/api/send_message", Some(alice.as_str()), "POST"),
        ("POST", "/api/states", Some(alice.as_str()), "GET"),
        ("PUT", "/ws", None, "GET"),
    ] {
        let r = call(&app, method, uri, token, None).await;
        let what = format!("{method} {uri}");
        assert_error(&r, StatusCode::METHOD_NOT_ALLOWED, &what);
        assert_eq!(r.body["success"], false, "{what}");
        let error = r.body["error"].as_str().unwrap();
        assert!(
            error.contains(allowed) && error.contains(uri),
            "{what}: {error}"
        );
        let allow = r.headers[header::ALLOW].to_str().unwrap();
        assert!(allow.contains(allowed), "{what}: Allow {allow}");
    }
}

/// Alice's login from `ip` as seen through `via` (a peer, with an `X-Forwarded-For` it sent).
fn from_peer(state: &ApiState, peer: &str) -> axum::Router {
    router(state.clone()).layer(MockConnectInfo(
        format!("{peer}:40000").parse::<SocketAddr>().unwrap(),
    ))
}

async fn bind_via(app: &axum::Router, forwarded_for: &str, password: &str) -> Reply {
    let body = json!({"human_agent_id": "alice", "password": password}).to_string();
    let req = Request::post("/api/bind_human_agent")
        .header(header::CONTENT_TYPE, "application/json")
        .header("x-forwarded-for", forwarded_for)
        .body(Body::from(body))
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    Reply {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or_default(),
        text: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

#[actix::test]
async fn behind_a_trusted_proxy_logins_are_throttled_per_forwarded_client() {
    let (team, cfg) = start();
    let http = cohort::config::Http {
        trusted_proxies: vec![cohort::config::parse_proxy("10.0.0.0/24").unwrap()],
        ..Default::default()
    };
    let state = limited(api(&team, &cfg)).with_http(http);
    // Everyone comes through the proxy at 10.0.0.2.
    let proxy = from_peer(&state, "10.0.0.2");
    // A guesser behind it uses up its failures, and then waits...
    for _ in 0..3 {
        let r = bind_via(&proxy, "203.0.113.66", "guess").await;
        assert_error(&r, StatusCode::UNAUTHORIZED, "a guess");
    }
    let r = bind_via(&proxy, "203.0.113.66", ALICE_PASSWORD).await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, "the guesser");
    // ...even when it puts another address in front of the one the proxy appended.
    let r = bind_via(&proxy, "198.51.100.1, 203.0.113.66", ALICE_PASSWORD).await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, "a spoofed hop");
    // Alice, behind the same proxy from her own address, is not held back.
    let r = bind_via(&proxy, "198.51.100.7", ALICE_PASSWORD).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

#[actix::test]
async fn forwarded_headers_from_an_untrusted_peer_are_ignored() {
    let (team, cfg) = start();
    let http = cohort::config::Http {
        trusted_proxies: vec![cohort::config::parse_proxy("10.0.0.1").unwrap()],
        ..Default::default()
    };
    let state = limited(api(&team, &cfg)).with_http(http);
    // Not the proxy: a guesser naming a fresh address each time is still one address.
    let guesser = from_peer(&state, "10.0.0.66");
    for i in 0..3 {
        let r = bind_via(&guesser, &format!("198.51.100.{i}"), "guess").await;
        assert_error(&r, StatusCode::UNAUTHORIZED, "a guess");
    }
    let r = bind_via(&guesser, "198.51.100.99", ALICE_PASSWORD).await;
    assert_error(
        &r,
        StatusCode::TOO_MANY_REQUESTS,
        "the guesser's own address counts",
    );
    // The same guesses through the trusted proxy are the clients it names.
    let proxy = from_peer(&state, "10.0.0.1");
    let r = bind_via(&proxy, "10.0.0.66", ALICE_PASSWORD).await;
    assert_error(
        &r,
        StatusCode::TOO_MANY_REQUESTS,
        "the proxy names the guesser",
    );
    let r = bind_via(&proxy, "198.51.100.99", ALICE_PASSWORD).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
}

#[actix::test]
async fn concurrent_wrong_logins_run_a_bounded_number_of_password_checks() {
    let (team, cfg) = start();
    let state = api(&team, &cfg).with_password_checks(2);
    // 24 wrong logins at once from 4 addresses, each for another id (so the back-off, which
    // counts per id and address, lets them all through to the password check).
    let mut crowd = Vec::new();
    for i in 0..24 {
        let app = from_peer(&state, &format!("10.0.1.{}", i % 4));
        crowd.push(tokio::spawn(async move {
            let body = json!({"human_agent_id": format!("user{i}"), "password": "guess"});
            post(&app, "/api/bind_human_agent", None, body).await
        }));
    }
    // Meanwhile alice logs in from elsewhere, retrying when told to, as a console does.
    let alice = from_peer(&state, "10.0.2.7");
    let mut answer = None;
    for _ in 0..20 {
        let body = json!({"human_agent_id": "alice", "password": ALICE_PASSWORD});
        let r = post(&alice, "/api/bind_human_agent", None, body).await;
        if r.status != StatusCode::TOO_MANY_REQUESTS {
            answer = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let answer = answer.expect("alice gets an answer other than 429");
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let (mut refused, mut wrong) = (0, 0);
    for t in crowd {
        let r = t.await.unwrap();
        match r.status {
            StatusCode::UNAUTHORIZED => wrong += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert!(r.headers.contains_key(header::RETRY_AFTER), "{}", r.text);
                refused += 1;
            }
            other => panic!("{other}: {}", r.text),
        }
    }
    assert_eq!(refused + wrong, 24);
    assert!(
        refused > 0,
        "some waited too long or found their address in line"
    );
    let peak = state.password_checks_peak();
    assert!((1..=2).contains(&peak), "{peak} checks ran at once");
}

/// The ids of a `{id: state}` page in the order the body lists them.
fn listed_order(r: &Reply) -> Vec<String> {
    let mut ids: Vec<(usize, String)> = r
        .body
        .as_object()
        .unwrap()
        .keys()
        .map(|id| (r.text.find(&format!("\"{id}\":")).unwrap(), id.clone()))
        .collect();
    ids.sort();
    ids.into_iter().map(|(_, id)| id).collect()
}

/// Steps come in the order they were created (their `created_at`), not by id, whole and a page
/// at a time.
#[actix::test]
async fn steps_are_listed_by_when_they_were_created() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    team.submit_goal(None, "Make us a logo").await.unwrap();
    let all = eventually("three steps", || async {
        let r = get(&app, "/api/states?type=step", &alice).await;
        (r.body.as_object().map_or(0, |m| m.len()) >= 3).then_some(r)
    })
    .await;
    let order = listed_order(&all);
    let created: Vec<(i64, String)> = order
        .iter()
        .map(|id| (all.body[id]["created_at"].as_i64().expect(id), id.clone()))
        .collect();
    let mut by_time = created.clone();
    by_time.sort();
    assert_eq!(created, by_time, "listed by creation time, then id");
    // Paging follows the same order.
    let mut paged = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let uri = match &next {
            Some(after) => format!("/api/states?type=step&limit=1&after={after}"),
            None => "/api/states?type=step&limit=1".to_owned(),
        };
        let r = get(&app, &uri, &alice).await;
        paged.extend(listed_order(&r));
        next = r
            .headers
            .get("x-cohort-next-after")
            .map(|v| v.to_str().unwrap().to_owned());
        if next.is_none() || paged.len() > 50 {
            break;
        }
    }
    assert_eq!(paged[..order.len()], order[..], "pages in the same order");
}

/// Seed 000 §10.3: a person gives at most `http.goals_per_person` goals (5) within
/// `http.goal_window_s` (15 s); one more is refused with 429 and `Retry-After`.
#[actix::test]
async fn a_persons_goals_are_held_to_five_in_fifteen_seconds() {
    let (team, cfg) = start();
    let state = api(&team, &cfg).with_http(cfg.http.clone());
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let goal = |n: usize| {
        json!({"human_agent_id": "alice", "task_id": base_task(&team),
            "receiver": ["manager"], "content": format!("goal {n}"), "need_reply": false})
    };
    for n in 0..5 {
        let r = post(&app, "/api/send_message", Some(&alice), goal(n)).await;
        assert_eq!(r.status, StatusCode::OK, "goal {n}: {}", r.text);
    }
    let r = post(&app, "/api/send_message", Some(&alice), goal(5)).await;
    assert_error(
        &r,
        StatusCode::TOO_MANY_REQUESTS,
        "a sixth goal within 15 s",
    );
    assert!(r.text.contains("http.goals_per_person"), "{}", r.text);
    let wait: u64 = r.headers[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=15).contains(&wait), "Retry-After {wait}");
}

/// Bad requests of every sort a person makes, each with the code its answer must carry.
async fn bad_requests(app: &axum::Router, alice: &str) -> Vec<(&'static str, Reply)> {
    let wrong = json!({"human_agent_id": "alice", "password": BOB_PASSWORD});
    let to_nowhere = json!({"human_agent_id": "alice", "task_id": "no-such-task",
        "receiver": ["manager"], "content": "hi"});
    vec![
        (
            "login_failed",
            post(app, "/api/bind_human_agent", None, wrong).await,
        ),
        (
            "unknown_task",
            post(app, "/api/send_message", Some(alice), to_nowhere).await,
        ),
        (
            "malformed_json",
            call(app, "POST", "/api/bind_human_agent", None, Some("{".into())).await,
        ),
        (
            "method_not_allowed",
            call(app, "GET", "/api/bind_human_agent", None, None).await,
        ),
        ("no_such_route", get(app, "/api/tasks", alice).await),
        (
            "no_token",
            call(app, "GET", "/api/states?type=task", None, None).await,
        ),
        (
            "no_such_task",
            post(app, "/api/task/no-such-task/cancel", Some(alice), json!({})).await,
        ),
    ]
}

#[actix::test]
async fn a_chinese_teams_errors_keep_their_code_and_english_and_add_a_chinese_message() {
    let (team, cfg) = start_zh();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    for (code, r) in bad_requests(&app, &alice).await {
        assert_eq!(r.body["error_code"], code, "{}", r.text);
        assert_eq!(r.headers[header::CONTENT_TYPE], "application/json");
        let (error, message) = (
            r.body["error"].as_str().unwrap(),
            r.body["message"].as_str().unwrap(),
        );
        assert!(error.is_ascii(), "`error` stays English: {error}");
        let chinese = message
            .chars()
            .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
        assert!(chinese && message != error, "{code}: {message}");
    }
    let said: std::collections::BTreeMap<&str, Reply> =
        bad_requests(&app, &alice).await.into_iter().collect();
    let text = |code: &str, field: &str| said[code].body[field].as_str().unwrap().to_owned();
    assert_eq!(
        text("login_failed", "error"),
        "wrong human_agent_id or password"
    );
    assert_eq!(text("login_failed", "message"), "human_agent_id 或密码错误");
    assert_eq!(
        text("unknown_task", "error"),
        "there is no task `no-such-task`"
    );
    assert_eq!(text("unknown_task", "message"), "没有任务 `no-such-task`");
    assert_eq!(text("no_such_task", "message"), "没有任务 `no-such-task`");
    // A library's words stay English inside a Chinese lead.
    let json_error = text("malformed_json", "error");
    assert_eq!(
        text("malformed_json", "message"),
        format!("请求体不是有效的 JSON：{json_error}")
    );
    assert_eq!(
        text("method_not_allowed", "message"),
        "/api/bind_human_agent 不接受 GET；它接受的方法：POST"
    );
    assert!(text("no_such_route", "message").starts_with("没有这个路由：GET /api/tasks；"));
}

#[actix::test]
async fn an_english_teams_errors_carry_their_code_and_a_message_that_is_the_error() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    for (code, r) in bad_requests(&app, &alice).await {
        assert_eq!(r.body["error_code"], code, "{}", r.text);
        assert_eq!(r.body["message"], r.body["error"], "{code}");
    }
}
