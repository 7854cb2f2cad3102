//! `cohort replay` as a person uses it: a run recorded by `cohort run --data` is run again with
//! every model call answered from its record. The quickstart, the tools example (its workspace
//! server called again) and a plan graph run in parallel replay to the same final states with
//! every recorded call asked for; a run recorded against a real endpoint replays with that
//! endpoint asked nothing and no API key set; a changed prompt template is reported at its
//! first differing line.

#[path = "support/competent.rs"]
mod competent;
#[path = "support/openai_stub.rs"]
mod openai_stub;
#[path = "support/scratch.rs"]
mod scratch;

use openai_stub::{OpenAiStub, StubResponse};
use scratch::Scratch;
use std::path::Path;
use std::process::{Command, Output};

fn cohort(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cohort"));
    c.args(args).env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Records `goal` with `team` in `db`; the run must end as `cohort run` says it did.
fn record(team: &Path, goal: &str, db: &Path, env: &[(&str, &str)]) {
    let (team, db) = (team.display().to_string(), db.display().to_string());
    let out = cohort(
        &["run", "--team", &team, "--goal", goal, "--data", &db],
        env,
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the recorded run: {said}");
}

/// Replays `db` with `team`: its exit code and what it said.
fn replay(team: &Path, db: &Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let (team, db) = (team.display().to_string(), db.display().to_string());
    let out = cohort(&["replay", "--team", &team, "--data", &db], env);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn same(team: &Path, db: &Path, env: &[(&str, &str)]) {
    let (code, said) = replay(team, db, env);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("ended in the same states"), "{said}");
    assert!(said.contains(" 0 recorded calls not asked for"), "{said}");
}

/// A copy of an example's folder (a run may write into it).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn the_quickstart_replays_to_the_same_states_and_a_changed_prompt_shows_where() {
    let dir = Scratch::new("replay-quickstart");
    let team = Path::new("examples/quickstart/team.yaml");
    let db = dir.join("run.db");
    record(team, "Write a haiku about autumn rain", &db, &[]);
    same(team, &db, &[]);
    // `cohort export` gives the record too: each call whole.
    let out = cohort(&["export", "--data", &db.display().to_string()], &[]);
    let calls: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|l| l.get("model_call").cloned())
        .collect();
    assert_eq!(calls.len(), 20, "every call of the quickstart");
    assert!(
        calls
            .iter()
            .all(|c| c["prompt"].as_str().is_some_and(|p| p.contains("# ")))
    );
    assert!(
        calls
            .iter()
            .any(|c| c["skill"] == "think" && c["reply"].as_str().is_some())
    );

    // The same team with one line of the think skill's prompt changed.
    let prompts = dir.join("prompts");
    copy_dir(Path::new("prompts"), &prompts);
    let think = prompts.join("en/skills/think.yaml");
    let text = std::fs::read_to_string(&think).unwrap();
    let changed = "  - Be brief everywhere; one line is best.";
    let text = text.replace(
        "  - Be thorough where it matters and brief elsewhere.",
        changed,
    );
    std::fs::write(&think, text).unwrap();
    let original = std::fs::read_to_string(team).unwrap();
    let script = std::fs::canonicalize("examples/quickstart/script.yaml").unwrap();
    let edited = original
        .replace(
            "script: script.yaml",
            &format!("script: {}", script.display()),
        )
        .replace(
            "language: en",
            &format!("language: en\nprompts_dir: {}", prompts.display()),
        );
    let edited_team = dir.join("team.yaml");
    std::fs::write(&edited_team, edited).unwrap();
    let (code, said) = replay(&edited_team, &db, &[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("requests differ from the recorded ones"),
        "{said}"
    );
    assert!(said.contains("think call (its prompt)"), "{said}");
    assert!(
        said.contains(&format!("+ replayed: {}", changed.trim())),
        "{said}"
    );
}

#[test]
fn the_tools_example_and_a_plan_graph_replay_to_the_same_states() {
    let dir = Scratch::new("replay-examples");
    let tools = dir.join("tools");
    copy_dir(Path::new("examples/tools"), &tools);
    let db = dir.join("tools.db");
    record(&tools.join("team.yaml"), "Write a greeting file", &db, &[]);
    // The run wrote hello.txt: called again, the server would list it; the record does not.
    assert!(tools.join("workspace/hello.txt").is_file());
    same(&tools.join("team.yaml"), &db, &[]);

    let graph = Path::new("tests/fixtures/plan-graph/team.yaml");
    let db = dir.join("graph.db");
    record(graph, "GOAL# run the plan", &db, &[]);
    same(graph, &db, &[]);
}

#[test]
fn a_run_against_an_endpoint_replays_without_asking_it_or_needing_its_key() {
    let dir = Scratch::new("replay-endpoint");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let stub = rt.block_on(OpenAiStub::start());
    stub.set_fallback(|req| StubResponse::reply_with_usage(&competent::competent(req), 50, 10));
    let team = dir.join("team.yaml");
    std::fs::write(
        &team,
        format!(
            "llm: {{provider: openai, base_url: '{}', model: m, api_key_env: REPLAY_TEST_KEY}}\n\
             agents:\n\
             \x20 - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n\
             \x20 - {{id: writer, role: writer, skills: [planning, reflection, summary, think]}}\n",
            stub.base_url()
        ),
    )
    .unwrap();
    let db = dir.join("run.db");
    record(
        &team,
        "Please reach GOAL<haiku>.",
        &db,
        &[("REPLAY_TEST_KEY", "sk-test")],
    );
    let asked = stub.requests().len();
    assert!(
        asked > 3,
        "the recorded run asked the endpoint {asked} times"
    );
    same(&team, &db, &[]);
    assert_eq!(
        stub.requests().len(),
        asked,
        "the replay asked the endpoint nothing"
    );
}
