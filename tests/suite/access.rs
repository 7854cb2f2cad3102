//! Who sees and touches what through the API: a member reads and posts only in their own
//! tasks on every protected route (the route table walked with every id), and only an
//! operator cancels a task or pauses an agent.

use crate::support::api_team;
use crate::support::http;

use api_team::*;
use axum::http::StatusCode;
use cohort::api::{PROTECTED_ROUTES, router};
use http::*;
use serde_json::json;
use std::time::Duration;

/// Work bob (a member) is not part of: a task whose group is only the manager, with a stage
/// and a step. Published straight into the monitor, as the runtime would.
fn publish_hidden_task(team: &cohort::actors::Team) {
    use cohort::event::{Change, StageChange, StepChange, TaskChange};
    use cohort::ids::StageRef;
    use cohort::state::{Executor, Skill, StageState, StepState, TaskState};
    let task = TaskState::new(
        "hidden-task".into(),
        "Alice's secret".into(),
        "hidden-intention".into(),
        "manager".into(),
    );
    let mut stage = StageState::new(
        "hidden-task".into(),
        "hidden-stage-intention".into(),
        Default::default(),
    );
    stage.stage_id = "hidden-stage".into();
    let mut step = StepState::new(
        "hidden-task".into(),
        StageRef::Stage("hidden-stage".into()),
        "manager".into(),
        Executor::Skill(Skill::Think),
        "hidden-step-intention",
        "",
    );
    step.step_id = "hidden-step".into();
    team.monitor.publish(vec![
        Change::Task(TaskChange::Created {
            task: Box::new(task),
        }),
        Change::Stage(StageChange::Added { stage, list_at: 0 }),
        Change::Step(StepChange::Added {
            agent_id: "manager".into(),
            step: Box::new(step),
            list_at: 0,
            todo_at: None,
            remember: false,
        }),
    ]);
}

#[actix::test]
async fn a_member_reads_and_posts_only_in_their_own_tasks_on_every_route() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    publish_hidden_task(&team);
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let bob = login(&state, "bob", BOB_PASSWORD).await;
    let base = base_task(&team);
    // Alice's goal goes to the manager in the base task, which everyone is in: the manager's
    // steps on it and the message itself are hers, not bob's.
    let goal = json!({"human_agent_id": "alice", "task_id": base, "receiver": ["manager"],
        "content": "alice-secret-goal", "need_reply": false});
    assert_eq!(
        post(&app, "/api/send_message", Some(&alice), goal)
            .await
            .status,
        StatusCode::OK
    );
    for _ in 0..200 {
        let manager = get(&app, "/api/state/manager", &alice).await;
        if manager.body["state"]["agent_step"]["step_list"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // The operator sees the hidden task; the member sees the base task (his group) only.
    assert_eq!(
        get(&app, "/api/state/hidden-task", &alice).await.status,
        StatusCode::OK
    );
    let tasks = get(&app, "/api/states?type=task", &bob).await;
    assert_eq!(
        tasks.body.as_object().unwrap().keys().collect::<Vec<_>>(),
        [&base]
    );
    assert_eq!(
        tasks.headers["x-cohort-total"], "1",
        "totals count only what he sees"
    );

    // Every protected route, with every id it could be pointed at, never shows the member a
    // trace of the hidden task; a post into it is refused and sends nothing.
    let secrets = [
        "hidden-task",
        "hidden-stage",
        "hidden-step",
        "hidden-intention",
        "alice-secret-goal",
    ];
    for route in PROTECTED_ROUTES {
        // An upload belongs to no task until a message names it (that send is checked here).
        if route.path == "/api/logout" || route.path == cohort::api::attachments::UPLOAD_PATH {
            continue;
        }
        let what = format!("{} {}", route.method, route.path);
        if route.method == "POST" && route.path.contains("{id}") {
            // A verdict on a step of the hidden task: it does not exist for him.
            let hidden = if route.path.starts_with("/api/task/") {
                "hidden-task"
            } else if route.path.starts_with("/api/stage/") {
                "hidden-stage"
            } else {
                "hidden-step"
            };
            let uri = route.path.replace("{id}", hidden);
            let body = if uri.ends_with("/reject") || uri.ends_with("/cancel") {
                json!({"reason": "no"})
            } else if uri.ends_with("/params") {
                json!({"values": {"path": "x"}})
            } else {
                json!({"args_hash": "x"})
            };
            let r = post(&app, &uri, Some(&bob), body).await;
            assert_error(&r, StatusCode::NOT_FOUND, &what);
            for s in secrets.iter().filter(|s| **s != hidden) {
                assert!(!r.text.contains(s), "{what} showed `{s}`: {}", r.text);
            }
            continue;
        }
        if route.method == "POST" {
            let into_hidden = json!({"human_agent_id": "bob", "task_id": "hidden-task",
                "receiver": ["manager"], "content": "let me in"});
            let r = post(&app, route.path, Some(&bob), into_hidden).await;
            assert_error(&r, StatusCode::FORBIDDEN, &what);
            let to_outsider = json!({"human_agent_id": "bob", "task_id": base,
                "receiver": ["nobody-bob-knows"], "content": "psst"});
            assert!(
                post(&app, route.path, Some(&bob), to_outsider)
                    .await
                    .status
                    .is_client_error()
            );
            continue;
        }
        let mut uris = Vec::new();
        for id in ["hidden-task", "hidden-stage", "hidden-step", "alice", "bob"] {
            let path = route.path.replace("{id}", id).replace("{*rest}", id);
            uris.push(path.clone());
            for kind in ["task", "stage", "agent", "step"] {
                uris.push(format!("{path}?type={kind}"));
                uris.push(format!("{path}?type={kind}&task=hidden-task"));
            }
        }
        for uri in uris {
            let r = get(&app, &uri, &bob).await;
            // An error may echo the id asked for; anything else of the hidden work is a leak.
            for s in secrets.iter().filter(|s| !uri.contains(*s)) {
                assert!(
                    !r.text.contains(s),
                    "{what}: GET {uri} showed `{s}`: {}",
                    r.text
                );
            }
        }
    }
    let conversation = get(&app, "/api/state/hidden-task", &alice).await;
    assert!(
        !conversation.text.contains("let me in"),
        "nothing was posted into it"
    );
}

#[actix::test]
async fn only_an_operator_cancels_a_task_or_pauses_an_agent() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    publish_hidden_task(&team);
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    let bob = login(&state, "bob", BOB_PASSWORD).await;
    let base = base_task(&team);
    let why = json!({"reason": "enough"});
    let r = post(
        &app,
        &format!("/api/task/{base}/cancel"),
        Some(&bob),
        why.clone(),
    )
    .await;
    assert_error(&r, StatusCode::FORBIDDEN, "a member, on a task he sees");
    let r = post(
        &app,
        &format!("/api/task/{base}/cancel"),
        Some(&alice),
        why.clone(),
    )
    .await;
    assert_error(&r, StatusCode::CONFLICT, "the base task");
    let r = post(&app, "/api/task/nope/cancel", Some(&alice), why.clone()).await;
    assert_error(&r, StatusCode::NOT_FOUND, "no such task");
    let r = post(&app, "/api/agent/manager/pause", Some(&bob), json!({})).await;
    assert_error(
        &r,
        StatusCode::FORBIDDEN,
        "a member pausing an agent he sees",
    );
    let r = post(&app, "/api/agent/manager/pause", Some(&alice), json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        get(&app, "/api/state/manager", &alice).await.body["state"]["paused"],
        true
    );
}
