//! 20 goals against an OpenAI-compatible endpoint that answers like a competent model but
//! breaks one call in five: 500s, 429s, hangs past the timeout, truncated bodies, empty
//! choices, answers without their tag or JSON, answers cut off at the token limit. Every goal
//! must still end as a finished task: HTTP faults are retried by the provider, unusable answers
//! are asked again, and nothing stalls.

use crate::support::competent;
use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::{Host, start_team};
use cohort::config::load_team;
use cohort::monitor::StateKind;
use competent::competent;
use openai_stub::{OpenAiStub, RecordedRequest, StubResponse};
use scratch::Scratch;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const GOALS: usize = 20;

/// The team on the stub at `base_url`, in a fresh folder: the folder's guard and the file.
fn team_file(base_url: &str) -> (Scratch, std::path::PathBuf) {
    let dir = Scratch::new("faults");
    let f = dir.join("team.yaml");
    std::fs::write(
        &f,
        format!(
            "llm: {{provider: openai, base_url: '{base_url}', model: flaky, timeout_secs: 1, max_retries: 3}}\n\
             agents:\n\
             \x20 - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: writer, role: writer, skills: [planning, think, reflection, summary, process_message, decision]}}\n"
        ),
    )
    .unwrap();
    (dir, f)
}

/// One call in five is broken, in turn by each kind of fault (deterministic: the n-th call).
fn flaky(n: u64, req: &RecordedRequest) -> StubResponse {
    let answer = competent(req);
    if n % 5 != 4 {
        return StubResponse::reply_with_usage(&answer, 100, 20);
    }
    match (n / 5) % 7 {
        0 => StubResponse::error(500, "upstream crashed"),
        1 => StubResponse::rate_limited(Some(0)),
        // Longer than the 1 s timeout.
        2 => StubResponse::reply(&answer).with_delay(Duration::from_millis(1500)),
        3 => {
            let body = StubResponse::reply(&answer).body;
            StubResponse::raw(200, body[..body.len() / 2].to_owned())
        }
        4 => StubResponse::raw(
            200,
            r#"{"id": "x", "object": "chat.completion", "choices": []}"#,
        ),
        5 => StubResponse::reply("Sure, I will get right on it."),
        _ => StubResponse::cut_off(&answer[..answer.len() / 2]),
    }
}

#[actix::test]
async fn twenty_goals_finish_though_one_call_in_five_fails() {
    let stub = OpenAiStub::start().await;
    let calls = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&calls);
    stub.set_fallback(move |req| flaky(counter.fetch_add(1, Ordering::Relaxed), req));
    let (_dir, file) = team_file(&stub.base_url());
    let cfg = load_team(&file).unwrap();
    let vars = |_: &str| None;
    let team = start_team(&cfg, &Host::new(&vars, env!("CARGO_BIN_EXE_cohort"))).unwrap();

    for n in 0..GOALS {
        team.submit_goal(None, &format!("Please reach GOAL<g{n}>."))
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let finished = loop {
        let tasks = team.monitor.snapshot(StateKind::Task);
        let done: Vec<&Value> = tasks
            .values()
            .filter(|t| t["task_name"] != "MAS base task" && t["execution_state"] == "finished")
            .collect();
        if done.len() >= GOALS || Instant::now() > deadline {
            break done
                .iter()
                .map(|t| t["task_name"].to_string())
                .collect::<Vec<_>>();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let steps = team.monitor.snapshot(StateKind::Step);
    let failed = steps
        .values()
        .filter(|s| s["execution_state"] == "failed")
        .count();
    let reasked: usize = steps
        .values()
        .filter_map(|s| s["execute_result"]["reasked"].as_array())
        .map(Vec::len)
        .sum();
    eprintln!(
        "{} calls, {} finished tasks, {failed} failed steps, {reasked} answers asked again",
        calls.load(Ordering::Relaxed),
        finished.len()
    );
    if finished.len() < GOALS {
        let tasks = team.monitor.snapshot(StateKind::Task);
        for t in tasks
            .values()
            .filter(|t| t["execution_state"] != "finished")
        {
            eprintln!(
                "open task {} {} stages {}",
                t["task_name"], t["execution_state"], t["stage_list"]
            );
        }
        for a in team.monitor.snapshot(StateKind::Agent).values() {
            eprintln!(
                "agent {} {} lock {} steps {}",
                a["agent_id"], a["working_state"], a["step_lock"], a["agent_step"]
            );
        }
        let mut open: Vec<_> = steps
            .values()
            .filter(|s| s["execution_state"] != "finished")
            .collect();
        open.sort_by_key(|s| s["executor"].to_string());
        for s in open {
            eprintln!(
                "step {} {} {} {}",
                s["agent_id"], s["executor"], s["execution_state"], s["text_content"]
            );
        }
    }
    assert_eq!(finished.len(), GOALS, "finished: {finished:?}");
    let mut names = finished.clone();
    names.sort();
    names.dedup();
    assert_eq!(
        names.len(),
        GOALS,
        "each goal became one task: {finished:?}"
    );
    assert!(reasked > 0, "the broken answers were asked again");
}
