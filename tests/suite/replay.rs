//! `cohort replay` as a person uses it: a run recorded by `cohort run --data` is run again with
//! every model call answered from its record. The quickstart, the tools example (its workspace
//! server called again) and a plan graph run in parallel replay to the same final states with
//! every recorded call asked for; a run recorded against a real endpoint replays with that
//! endpoint asked nothing and no API key set; a changed prompt template is reported at its
//! first differing line.

use crate::support::competent;
use crate::support::openai_stub;
use crate::support::scratch;

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

/// Records `goal` and replays it: the replay keeps the recorded schedule, each agent's
/// messages taken among its steps and answers as recorded, however loaded the machine.
fn record_and_replay_the_same(team: &Path, goal: &str, dir: &Path) -> std::path::PathBuf {
    let db = dir.join("run.db");
    record(team, goal, &db, &[]);
    same(team, &db, &[]);
    db
}

#[test]
fn the_quickstart_replays_to_the_same_states_and_a_changed_prompt_shows_where() {
    let dir = Scratch::new("replay-quickstart");
    let team = Path::new("examples/quickstart/team.yaml");
    let db = record_and_replay_the_same(team, "Write a haiku about autumn rain", &dir);
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
    let team = endpoint_team(&dir, &stub);
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

#[test]
fn a_fork_at_a_failed_step_goes_on_with_a_live_endpoint_and_finishes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = Scratch::new("replay-fork");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let stub = rt.block_on(OpenAiStub::start());
    // While recorded, the endpoint answers the writer's think step with nothing, so it fails.
    let broken = Arc::new(AtomicBool::new(true));
    let b = broken.clone();
    stub.set_fallback(move |req| {
        let think = req
            .prompt()
            .is_some_and(|p| p.contains("- executor: think ("));
        if think && b.load(Ordering::Relaxed) {
            StubResponse::no_content()
        } else {
            StubResponse::reply_with_usage(&competent::competent(req), 50, 10)
        }
    });
    let team = endpoint_team(&dir, &stub);
    let key = [("REPLAY_TEST_KEY", "sk-test")];
    let db = dir.join("run.db");
    let (t, d) = (team.display().to_string(), db.display().to_string());
    let goal = "Please reach GOAL<haiku>.";
    cohort(
        &[
            "run",
            "--team",
            &t,
            "--goal",
            goal,
            "--data",
            &d,
            "--timeout",
            "60",
        ],
        &key,
    );
    let calls: Vec<serde_json::Value> = export(&db)
        .into_iter()
        .filter_map(|l| l.get("model_call").cloned())
        .collect();
    let failed = calls
        .iter()
        .find(|c| c["skill"] == "think")
        .expect("the recorded think call");
    let (step, task) = (
        failed["step_id"].as_str().unwrap(),
        failed["task_id"].as_str().unwrap(),
    );
    let recorded_step = step_state(&db, step);
    assert_eq!(
        recorded_step["execution_state"], "failed",
        "{recorded_step}"
    );

    broken.store(false, Ordering::Relaxed);
    let asked = stub.requests().len();
    let fork = dir.join("fork.db");
    let out = cohort(
        &[
            "replay",
            "--team",
            &t,
            "--data",
            &d,
            "--fork-at",
            step,
            "--llm",
            "live",
            "--step-text",
            "Draft it in five words.",
            "--out",
            &fork.display().to_string(),
        ],
        &key,
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("task finished"), "{said}");
    // Before the step the record answered; from it the endpoint did, told the edited text.
    let live = &stub.requests()[asked..];
    let before = calls.iter().filter(|c| c["step_id"] != step).count();
    assert!(
        !live.is_empty() && live.len() < calls.len(),
        "{} live of {}",
        live.len(),
        calls.len()
    );
    assert!(
        live[0]
            .prompt()
            .unwrap()
            .contains("Draft it in five words."),
        "the first live call is the edited step's: {:?}",
        live[0].prompt()
    );
    assert!(before > 0);
    // The fork is a new task beside the recorded one, which it names; the recorded store is
    // as it was.
    let lines = export(&fork);
    let tasks = last_states(&lines, "task");
    let forked: Vec<_> = tasks
        .values()
        .filter(|t| t.get("forked_from").is_some())
        .collect();
    assert_eq!(forked.len(), 1, "{tasks:?}");
    assert_eq!(forked[0]["forked_from"]["task_id"], task);
    assert_eq!(forked[0]["forked_from"]["step_id"], step);
    assert_eq!(forked[0]["execution_state"], "finished");
    assert!(tasks.contains_key(task), "the recorded task is beside it");
    assert!(
        last_states(&export(&db), "task")
            .values()
            .all(|t| t.get("forked_from").is_none())
    );
    // A step no model call made cannot be a fork's point; nor can a fork be written over a file.
    let out = cohort(
        &[
            "replay",
            "--team",
            &t,
            "--data",
            &d,
            "--fork-at",
            "no-such-step",
        ],
        &key,
    );
    assert_eq!(out.status.code(), Some(3));
    let out = cohort(
        &[
            "replay",
            "--team",
            &t,
            "--data",
            &d,
            "--fork-at",
            step,
            "--out",
            &fork.display().to_string(),
        ],
        &key,
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A team of a manager and a writer asking `stub`, its key in `REPLAY_TEST_KEY`.
fn endpoint_team(dir: &Path, stub: &OpenAiStub) -> std::path::PathBuf {
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
    team
}

/// `cohort export`'s lines.
fn export(db: &Path) -> Vec<serde_json::Value> {
    let out = cohort(&["export", "--data", &db.display().to_string()], &[]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Each task's state as the exported events leave it: created, then its state and its fork
/// mark.
fn last_states(
    lines: &[serde_json::Value],
    kind: &str,
) -> std::collections::HashMap<String, serde_json::Value> {
    let mut tasks = std::collections::HashMap::new();
    for l in lines.iter().filter(|l| l["kind"] == kind) {
        match l["op"].as_str() {
            Some("created") => {
                let t = l["task"].clone();
                tasks.insert(t["task_id"].as_str().unwrap().to_owned(), t);
            }
            Some("state") => {
                if let Some(t) = tasks.get_mut(l["task_id"].as_str().unwrap()) {
                    t["execution_state"] = l["execution_state"].clone();
                }
            }
            Some("forked") => {
                if let Some(t) = tasks.get_mut(l["task_id"].as_str().unwrap()) {
                    t["forked_from"] = l["from"].clone();
                }
            }
            _ => {}
        }
    }
    tasks
}

/// A step's state as the exported events leave it (added, then its updates).
fn step_state(db: &Path, step: &str) -> serde_json::Value {
    let mut state = serde_json::Value::Null;
    for l in export(db).into_iter().filter(|l| l["kind"] == "step") {
        if l["op"] == "added" && l["step"]["step_id"] == step {
            state = l["step"].clone();
        } else if l["op"] == "updated"
            && l["step_id"] == step
            && let Some(s) = l.get("execution_state")
        {
            state["execution_state"] = s.clone();
        }
    }
    state
}
