//! `GET /metrics` over the quickstart team after its goal: the text parses as Prometheus' text
//! format (a third-party parser), and its counters match what the team's states say it did:
//! steps by executor and outcome, step durations counted once per step, tokens by kind, LLM
//! calls timed. Operators only.

use crate::support::api_team;
use crate::support::http;

use api_team::*;
use axum::http::StatusCode;
use cohort::api::router;
use http::*;
use prometheus_parse::{Sample, Scrape, Value as Figure};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The samples of family `name` whose labels include `labels`.
fn samples<'a>(scrape: &'a Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect()
}

fn value(s: &Sample) -> f64 {
    match &s.value {
        Figure::Counter(v) | Figure::Gauge(v) | Figure::Untyped(v) => *v,
        other => panic!("{} is not a single value: {other:?}", s.metric),
    }
}

fn total(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(scrape, name, labels).into_iter().map(value).sum()
}

#[actix::test]
async fn the_metrics_parse_and_count_what_the_states_say_the_team_did() {
    let (team, _cfg) =
        start_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart"));
    let state = api(&team, &_cfg);
    let app = router(state.clone());
    let alice = login(&state, "alice", ALICE_PASSWORD).await;
    team.submit_goal(None, "Write a haiku about autumn rain")
        .await
        .unwrap();

    // The goal's task finishes and every agent goes quiet (its last steps end too).
    let steps: Value = eventually(
        "the quickstart's task to finish and its agents to go quiet",
        || {
            let app = app.clone();
            let alice = alice.clone();
            async move {
                let tasks = get(&app, "/api/states?type=task", &alice).await.body;
                let done = tasks.as_object()?.values().any(|t| {
                    t["task_name"] != "MAS base task" && t["execution_state"] == "finished"
                });
                let steps = get(&app, "/api/states?type=step", &alice).await.body;
                let quiet = steps.as_object()?.values().all(|s| {
                    ["finished", "failed", "cancelled"]
                        .contains(&s["execution_state"].as_str().unwrap_or(""))
                });
                (done && quiet).then_some(steps)
            }
        },
    )
    .await;

    let r = call(&app, "GET", "/metrics", Some(&alice), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let scrape = Scrape::parse(r.text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    assert!(
        scrape.docs.contains_key("cohort_steps_total"),
        "no HELP for the steps: {}",
        r.text
    );

    // Steps by executor and outcome: as many as the states hold, each counted once.
    let mut ended: BTreeMap<(String, String), f64> = BTreeMap::new();
    let (mut prompt, mut completion) = (0.0, 0.0);
    for s in steps.as_object().unwrap().values() {
        let key = (
            s["executor"].as_str().unwrap().to_owned(),
            s["execution_state"].as_str().unwrap().to_owned(),
        );
        *ended.entry(key).or_default() += 1.0;
        prompt += s["token_usage"]["prompt_tokens"].as_f64().unwrap_or(0.0);
        completion += s["token_usage"]["completion_tokens"]
            .as_f64()
            .unwrap_or(0.0);
    }
    assert!(
        ended.len() >= 8,
        "the quickstart runs every kind of step: {ended:?}"
    );
    for ((executor, outcome), n) in &ended {
        let counted = total(
            &scrape,
            "cohort_steps_total",
            &[("executor", executor), ("outcome", outcome)],
        );
        assert_eq!(counted, *n, "{executor} {outcome}");
        let timed = total(
            &scrape,
            "cohort_step_duration_seconds_count",
            &[("executor", executor)],
        );
        let of_executor: f64 = ended
            .iter()
            .filter(|((e, _), _)| e == executor)
            .map(|(_, n)| n)
            .sum();
        assert_eq!(
            timed, of_executor,
            "every {executor} step that ran is timed once"
        );
    }
    assert_eq!(
        total(&scrape, "cohort_steps_total", &[]),
        ended.values().sum::<f64>()
    );

    // The memory budget and what its bounded parts hold, each within its share.
    let budget = |part| total(&scrape, "cohort_memory_budget_bytes", &[("part", part)]);
    let held = |part| total(&scrape, "cohort_memory_held_bytes", &[("part", part)]);
    assert_eq!(budget("total"), (_cfg.retention.memory.bytes) as f64);
    for part in ["retired_steps", "feed"] {
        assert!(
            budget(part) > 0.0 && held(part) <= budget(part),
            "{part}: {} of {}",
            held(part),
            budget(part)
        );
    }
    assert_eq!(
        held("retired_steps"),
        total(&scrape, "cohort_retired_steps_bytes", &[])
    );

    // Tokens: the steps' counts, by kind, added up over agents and models.
    assert!(prompt > 0.0 && completion > 0.0);
    assert_eq!(
        total(&scrape, "cohort_tokens_total", &[("kind", "prompt")]),
        prompt
    );
    assert_eq!(
        total(&scrape, "cohort_tokens_total", &[("kind", "completion")]),
        completion
    );
    let writer = samples(&scrape, "cohort_tokens_total", &[("agent", "writer")]);
    assert!(
        !writer.is_empty()
            && writer.iter().all(|s| s
                .labels
                .get("model")
                .is_some_and(|m| m.starts_with("scripted/"))),
        "the writer's tokens under its model (provider/model): {}",
        r.text
    );

    // Every model call was timed, answered; and nothing runs or waits now.
    let answered = total(
        &scrape,
        "cohort_llm_call_duration_seconds_count",
        &[("outcome", "answered")],
    );
    let calling = ended
        .iter()
        .filter(|((e, _), _)| !["task_manager"].contains(&e.as_str()))
        .count() as f64;
    assert!(
        answered >= calling,
        "{answered} model calls timed for {calling} kinds of step"
    );
    for gauge in [
        "cohort_steps_running",
        "cohort_steps_queued",
        "cohort_waits_for_a_person",
    ] {
        assert_eq!(total(&scrape, gauge, &[]), 0.0, "{gauge}");
    }
    assert_eq!(
        total(&scrape, "cohort_tasks", &[("state", "finished")]),
        1.0
    );

    // A member may not read them.
    let bob = login(&state, "bob", BOB_PASSWORD).await;
    let r = call(&app, "GET", "/metrics", Some(&bob), None).await;
    assert_error(&r, StatusCode::FORBIDDEN, "a member reading the metrics");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Stops the server it holds when dropped, also when the test fails.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cohort serve --metrics-bind` serves the figures to a scraper without a token on that
/// address (and nothing else there), while the API's own `/metrics` still wants an operator.
#[tokio::test]
async fn a_scraper_reads_the_metrics_without_a_token_on_their_own_address() {
    let (api, scrape) = (free_port(), free_port());
    let _server = Serving(
        std::process::Command::new(env!("CARGO_BIN_EXE_cohort"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "serve",
                "--team",
                "examples/operator/team.yaml",
                "--no-data",
            ])
            .arg("--bind")
            .arg(format!("127.0.0.1:{api}"))
            .arg("--metrics-bind")
            .arg(format!("127.0.0.1:{scrape}"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let text = loop {
        match http
            .get(format!("http://127.0.0.1:{scrape}/metrics"))
            .send()
            .await
        {
            Ok(r) => {
                assert_eq!(r.status(), 200);
                let kind = r.headers()["content-type"].to_str().unwrap().to_owned();
                assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
                break r.text().await.unwrap();
            }
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(e) => panic!("the metrics were not served: {e}"),
        }
    };
    let scraped = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    assert_eq!(total(&scraped, "cohort_steps_running", &[]), 0.0, "{text}");
    assert!(
        scraped
            .docs
            .contains_key("cohort_llm_call_duration_seconds")
    );
    let other = http
        .get(format!("http://127.0.0.1:{scrape}/api/states?type=task"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404, "only the metrics are served there");
    let on_api = http
        .get(format!("http://127.0.0.1:{api}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(on_api.status(), 401, "the API's /metrics wants a token");
}
