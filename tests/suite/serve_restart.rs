//! `cohort serve` keeps its team in a SQLite file: stopped (SIGTERM) and started again on the
//! same file it shows every task, stage, agent and step it had, and the question an agent
//! was waiting on is still waiting for its person.

use crate::support::scratch;

use crate::support::served::Served;
use scratch::Scratch;
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

fn start(data: &std::path::Path, log: std::path::PathBuf) -> Served {
    let data = data.display().to_string();
    let args = ["--team", "examples/operator/team.yaml", "--data", &data];
    Served::start(std::path::Path::new(env!("CARGO_MANIFEST_DIR")), &args, log)
}

async fn login(http: &reqwest::Client, s: &Served) -> String {
    s.login(http, ("operator", "cohort-demo")).await
}

/// Every state the API shows, each kind.
async fn all_states(http: &reqwest::Client, s: &Served, token: &str) -> Value {
    let mut out = serde_json::Map::new();
    for kind in ["task", "stage", "agent", "step"] {
        out.insert(
            kind.into(),
            s.get(http, token, &format!("/api/states?type={kind}"))
                .await,
        );
    }
    Value::Object(out)
}

fn stop(mut s: Served) {
    let pid = s.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn serve_stopped_and_started_on_the_same_data_carries_on() {
    let dir = Scratch::new("serve-restart");
    let data = dir.join("team.db");
    let http = reqwest::Client::new();

    let s = start(&data, dir.join("first.log"));
    let token = login(&http, &s).await;
    let base_task = s.get(&http, &token, "/api/states?type=task").await;
    let base_task = base_task
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let r = http
        .post(format!("{}/api/send_message", s.base))
        .bearer_auth(&token)
        .json(&json!({
            "human_agent_id": "operator",
            "task_id": base_task,
            "receiver": ["manager"],
            "content": "Write a haiku about autumn rain",
            "need_reply": false,
        }))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    // The scripted manager asks the operator a waiting question: wait until it is pending.
    let deadline = Instant::now() + Duration::from_secs(30);
    let pending = loop {
        let p = s.get(&http, &token, "/api/human/operator/pending").await;
        if p["pending"].as_array().is_some_and(|a| !a.is_empty()) {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "no question reached the operator"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = all_states(&http, &s, &token).await;
    assert!(before["step"].as_object().unwrap().len() >= 2, "{before}");
    stop(s);

    // The token is not in the store: only its hash is.
    let raw = std::fs::read(&data).unwrap();
    let wal = std::fs::read(dir.join("team.db-wal")).unwrap_or_default();
    for bytes in [&raw, &wal] {
        assert!(
            !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
            "the token itself is stored"
        );
    }

    let s = start(&data, dir.join("second.log"));
    // Wait until it serves, then use the token of the first run: the session survived.
    login(&http, &s).await;
    let after = all_states(&http, &s, &token).await;
    assert_eq!(after, before, "every state as it was before the stop");
    assert_eq!(
        s.get(&http, &token, "/api/human/operator/pending").await,
        pending,
        "the waiting question still waits for its person"
    );
    let log = std::fs::read_to_string(&s.log).unwrap();
    assert!(log.contains("The team's data is in sqlite://"), "{log}");

    // And it carries on: the answer reaches the manager, which was waiting for it across the
    // restart, and the goal's task runs to its end. The scripted model goes on with its next
    // replies (not the first ones again): one question, one task.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut answers = 0;
    let tasks = loop {
        let pending = s.get(&http, &token, "/api/human/operator/pending").await;
        for q in pending["pending"].as_array().into_iter().flatten() {
            answers += 1;
            let r = http
                .post(format!("{}/api/send_message", s.base))
                .bearer_auth(&token)
                .json(&json!({
                    "human_agent_id": "operator",
                    "task_id": q["task_id"],
                    "receiver": [q["sender_id"]],
                    "content": "Autumn",
                    "need_reply": false,
                }))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        }
        // The example's plans wait for the operator's check: confirmed as they are.
        let waiting = s.get(&http, &token, "/api/approvals").await;
        for a in waiting["approvals"].as_array().into_iter().flatten() {
            let r = http
                .post(format!(
                    "{}/api/step/{}/approve",
                    s.base,
                    a["step_id"].as_str().unwrap()
                ))
                .bearer_auth(&token)
                .json(&json!({ "plan_hash": a["plan_hash"] }))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        }
        let tasks = s.get(&http, &token, "/api/states?type=task").await;
        let finished = tasks
            .as_object()
            .unwrap()
            .values()
            .any(|t| t["task_name"] != "MAS base task" && t["execution_state"] == "finished");
        if finished {
            break tasks;
        }
        assert!(
            Instant::now() < deadline,
            "the goal's task did not finish after the restart: {tasks}\n{}",
            std::fs::read_to_string(&s.log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(answers, 1, "the manager asked its one question once");
    assert_eq!(
        tasks.as_object().unwrap().len(),
        2,
        "the base task and the goal's: {tasks}"
    );
}
