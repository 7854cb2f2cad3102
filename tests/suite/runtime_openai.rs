//! The runtime on the `openai` provider against a local OpenAI-compatible server: real HTTP,
//! real async-openai types. A malformed answer fails that step only; the agent lives on.

use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::Host;
use cohort::actors::start_team;
use cohort::config::load_team;
use cohort::monitor::StateKind;
use openai_stub::{OpenAiStub, StubResponse};
use scratch::Scratch;
use serde_json::Value;
use std::time::Duration;

/// Each test gets its own folder: the tests run in parallel with different endpoints. The
/// folder's guard (it removes the folder when dropped) and the team file.
fn team_file(test: &str, base_url: &str) -> (Scratch, std::path::PathBuf) {
    let dir = Scratch::new(&format!("rt-openai-{test}"));
    let f = dir.join("team.yaml");
    std::fs::write(
        &f,
        format!(
            "llm: {{provider: openai, base_url: '{base_url}', model: test-model, api_key_env: COHORT_TEST_KEY, temperature: 0.1, max_tokens: 256, max_retries: 1}}\n\
             agents:\n  - {{id: manager, role: manager, skills: [process_message, decision, task_manager, ask_info]}}\n"
        ),
    )
    .unwrap();
    (dir, f)
}

/// Waits until `pred` holds on the step states, or fails after a few seconds.
async fn wait_for_steps(
    monitor: &cohort::monitor::Monitor,
    what: &str,
    pred: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    for _ in 0..200 {
        let steps: Vec<Value> = monitor.snapshot(StateKind::Step).into_values().collect();
        if pred(&steps) {
            return steps;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "timed out waiting for {what}: {:#?}",
        monitor.snapshot(StateKind::Step)
    );
}

/// A goal is a task_manager step at once: this answer makes it a task.
const ADD_TASK: &str = r#"<task_instruction>{"action": "add_task", "task_name": "Later", "task_intention": "do it later"}</task_instruction>"#;

/// Once the queued answers are used: the notice that a task was created is answered by
/// closing that task, as failed since no stage ran (2 prompt tokens, 1 completion), anything
/// else by text without a tag.
fn close_new_tasks(req: &openai_stub::RecordedRequest) -> StubResponse {
    let prompt = req.prompt().unwrap_or_default();
    let task = prompt
        .split("task_id: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .filter(|_| prompt.contains("was created with you as its manager"));
    match task {
        Some(task) => StubResponse::reply_with_usage(
            &format!(
                r#"<task_instruction>{{"action": "finish_task", "task_id": "{task}", "task_summary": "later", "outcome": "failed"}}</task_instruction>"#
            ),
            2,
            1,
        ),
        None => StubResponse::reply("stub reply"),
    }
}

fn with(steps: &[Value], executor: &str, state: &str) -> usize {
    steps
        .iter()
        .filter(|s| s["executor"] == executor && s["execution_state"] == state)
        .count()
}

/// An answer without its tag is asked again with the exact error (over real HTTP, to an
/// OpenAI-compatible endpoint), three times; then the step fails with every try on record,
/// and the goal, which must not be lost, gets one fresh step carrying the reason.
#[actix::test]
async fn an_answer_without_its_tag_is_asked_again_then_fails_and_the_goal_is_tried_once_more() {
    let stub = OpenAiStub::start().await;
    // task_manager answers without <task_instruction>, each a little different: an answer
    // given twice is not asked for a third time (`the_same_unusable_answer_twice_is_not_asked_for_again`).
    let bad = "I would create a task now.";
    let rewordings = [
        "I will create the task.",
        "Creating it.",
        "The task is created.",
    ];
    stub.push_all([
        StubResponse::reply_with_usage(bad, 120, 30),
        StubResponse::reply_with_usage(rewordings[0], 10, 5),
        StubResponse::reply_with_usage(rewordings[1], 10, 5),
        StubResponse::reply_with_usage(rewordings[2], 10, 5),
        StubResponse::reply_with_usage(ADD_TASK, 3, 1),
    ]);
    stub.set_fallback(close_new_tasks);
    let (_dir, file) = team_file("no-tag", &stub.base_url());
    let cfg = load_team(&file).unwrap();
    let vars = |k: &str| (k == "COHORT_TEST_KEY").then(|| "sk-test".to_owned());
    let team = start_team(&cfg, &host(&vars)).unwrap();

    team.submit_goal(None, "first goal").await.unwrap();
    let steps = wait_for_steps(&team.monitor, "the goal's step to fail", |s| {
        with(s, "task_manager", "failed") == 1
    })
    .await;
    let failed = steps
        .iter()
        .find(|s| s["execution_state"] == "failed")
        .unwrap();
    let reason = failed["execute_result"]["error"].as_str().unwrap();
    assert!(
        reason.contains("task_instruction"),
        "reason names the missing tag: {reason}"
    );
    assert_eq!(
        failed["execute_result"]["answer"], rewordings[2],
        "the last answer"
    );
    let tries = failed["execute_result"]["reasked"].as_array().unwrap();
    assert_eq!(tries.len(), 3, "asked again three times: {tries:?}");
    assert!(
        tries
            .iter()
            .zip([bad, rewordings[0], rewordings[1]])
            .all(|(t, answer)| t["answer"] == answer
                && t["error"].as_str().unwrap().contains("task_instruction"))
    );

    wait_for_steps(
        &team.monitor,
        "the goal's second try and the new task",
        |s| with(s, "task_manager", "finished") == 2,
    )
    .await;

    let reqs = stub.requests();
    assert_eq!(
        reqs.len(),
        6,
        "four tries, then the second try's add_task and the new task's finish_task"
    );
    let second = reqs[4].prompt().unwrap();
    assert!(
        second.contains("first goal") && second.contains("Your first try at this failed"),
        "{second}"
    );
    assert_eq!(reqs[0].model(), Some("test-model"));
    assert_eq!(reqs[0].authorization(), Some("Bearer sk-test"));
    // A try is the first prompt again with the error and the answer it could not use.
    let first = reqs[0].prompt().unwrap();
    let again = reqs[1].prompt().unwrap();
    assert!(first.contains("first goal"));
    assert!(!first.contains("could not be used"));
    assert!(again.starts_with(first), "the same question");
    assert!(
        again.contains("Your previous answer could not be used")
            && again.contains("task_instruction")
            && again.contains(bad)
    );
    let agent = team.monitor.get(StateKind::Agent, "manager").unwrap();
    assert_eq!(
        agent["token_usage"]["prompt_tokens"],
        120 + 3 * 10 + 3 + 2,
        "every try's tokens count"
    );
    // Its last step is over; the agent turns idle as it settles (a moment later under load).
    let mut state = agent["working_state"].clone();
    for _ in 0..400 {
        if state == "idle" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        state = team.monitor.get(StateKind::Agent, "manager").unwrap()["working_state"].clone();
    }
    assert_eq!(state, "idle");
}

/// A model that hands back the same unusable answer when asked again would hand it back a
/// third time: the step fails after one re-ask, and the goal's second try still makes the task.
#[actix::test]
async fn the_same_unusable_answer_twice_is_not_asked_for_again() {
    let stub = OpenAiStub::start().await;
    let bad = "I would create a task now.";
    stub.push_all([
        StubResponse::reply(bad),
        StubResponse::reply(bad),
        StubResponse::reply(ADD_TASK),
    ]);
    stub.set_fallback(close_new_tasks);
    let (_dir, file) = team_file("same-answer", &stub.base_url());
    let cfg = load_team(&file).unwrap();
    let vars = |k: &str| (k == "COHORT_TEST_KEY").then(|| "sk-test".to_owned());
    let team = start_team(&cfg, &host(&vars)).unwrap();

    team.submit_goal(None, "first goal").await.unwrap();
    let steps = wait_for_steps(
        &team.monitor,
        "the goal's second try and the new task",
        |s| with(s, "task_manager", "failed") == 1 && with(s, "task_manager", "finished") == 2,
    )
    .await;
    let failed = steps
        .iter()
        .find(|s| s["execution_state"] == "failed")
        .unwrap();
    let tries = failed["execute_result"]["reasked"].as_array().unwrap();
    assert_eq!(tries.len(), 1, "asked again once: {tries:?}");
    assert_eq!(tries[0]["answer"], bad);
    assert_eq!(stub.requests().len(), 4, "two tries, add_task, finish_task");
}

/// An answer the token limit cut off is asked again saying so (answer shorter).
#[actix::test]
async fn an_answer_cut_off_at_max_tokens_is_asked_again_saying_so() {
    let stub = OpenAiStub::start().await;
    stub.push_all([
        StubResponse::cut_off(
            "<task_instruction>{\"action\": \"add_task\", \"task_name\": \"a very long",
        ),
        StubResponse::reply(ADD_TASK),
    ]);
    stub.set_fallback(close_new_tasks);
    let (_dir, file) = team_file("cut-off", &stub.base_url());
    let cfg = load_team(&file).unwrap();
    let vars = |k: &str| (k == "COHORT_TEST_KEY").then(|| "sk-test".to_owned());
    let team = start_team(&cfg, &host(&vars)).unwrap();
    team.submit_goal(None, "first goal").await.unwrap();
    wait_for_steps(
        &team.monitor,
        "the goal's step and the new task's to finish",
        |s| with(s, "task_manager", "finished") == 2,
    )
    .await;
    let reqs = stub.requests();
    assert_eq!(reqs.len(), 3);
    let again = reqs[1].prompt().unwrap();
    assert!(
        again.contains("cut off at the model's token limit"),
        "{again}"
    );
    // Asked again more freely: the same prompt at the same temperature tends to give the same
    // runaway answer.
    let temperature = |i: usize| reqs[i].body["temperature"].as_f64().unwrap();
    assert!((temperature(0) - 0.1).abs() < 1e-6);
    assert!((temperature(1) - 0.4).abs() < 1e-6, "{}", temperature(1));
    assert!(
        (temperature(2) - 0.1).abs() < 1e-6,
        "the next step asks as configured"
    );
}

/// A bad answer followed by a good one: the step finishes, its result keeps the try.
#[actix::test]
async fn an_answer_fixed_on_the_second_ask_finishes_the_step() {
    let stub = OpenAiStub::start().await;
    stub.push_all([
        StubResponse::reply("I would create a task now."),
        StubResponse::reply(ADD_TASK),
    ]);
    stub.set_fallback(close_new_tasks);
    let (_dir, file) = team_file("fixed", &stub.base_url());
    let cfg = load_team(&file).unwrap();
    let vars = |k: &str| (k == "COHORT_TEST_KEY").then(|| "sk-test".to_owned());
    let team = start_team(&cfg, &host(&vars)).unwrap();
    team.submit_goal(None, "first goal").await.unwrap();
    let steps = wait_for_steps(&team.monitor, "the goal's step to end", |s| {
        s.iter().any(|s| {
            s["executor"] == "task_manager"
                && ["finished", "failed"].contains(&s["execution_state"].as_str().unwrap())
        })
    })
    .await;
    let goal = steps
        .iter()
        .find(|s| {
            s["executor"] == "task_manager"
                && s["text_content"].as_str().unwrap().contains("first goal")
        })
        .unwrap();
    assert_eq!(goal["execution_state"], "finished", "{goal}");
    assert_eq!(
        goal["execute_result"]["reasked"].as_array().unwrap().len(),
        1
    );
    wait_for_steps(&team.monitor, "the new task's step", |s| {
        with(s, "task_manager", "finished") == 2
    })
    .await;
    assert_eq!(stub.requests().len(), 3);
}

/// Prompt tokens the stub reports for replies made without explicit usage.
/// A 400 is asked once more without the answer's schema (to tell an endpoint that refuses
/// `response_format` from a bad request), and not retried beyond that.
#[actix::test]
async fn a_400_fails_the_step_without_retrying_and_the_agent_goes_on() {
    let stub = OpenAiStub::start().await;
    stub.push_all([
        StubResponse::error(400, "model `test-model` does not support this"),
        StubResponse::error(400, "model `test-model` does not support this"),
        StubResponse::reply(ADD_TASK),
    ]);
    stub.set_fallback(close_new_tasks);
    let (_dir, file) = team_file("http-400", &stub.base_url());
    let cfg = load_team(&file).unwrap();
    let team = start_team(&cfg, &host(&|_| Some("sk-test".to_owned()))).unwrap();
    team.submit_goal(None, "first goal").await.unwrap();
    let steps = wait_for_steps(&team.monitor, "a failed step and its second try", |s| {
        with(s, "task_manager", "failed") == 1 && with(s, "task_manager", "finished") >= 1
    })
    .await;
    let failed = steps
        .iter()
        .find(|s| s["execution_state"] == "failed")
        .unwrap();
    let reason = failed["execute_result"]["error"].as_str().unwrap();
    assert!(
        reason.contains("400") && reason.contains("does not support this"),
        "{reason}"
    );
    wait_for_steps(&team.monitor, "the new task's step", |s| {
        with(s, "task_manager", "finished") == 2
    })
    .await;
    let reqs = stub.requests();
    assert_eq!(reqs.len(), 4, "no retry on a 400");
    assert!(reqs[0].body.get("response_format").is_some());
    assert!(reqs[1].body.get("response_format").is_none());
    // The refusal was not the schema's: the next step is constrained again.
    assert!(reqs[2].body.get("response_format").is_some());
}

#[actix::test]
async fn a_missing_api_key_variable_is_a_clear_startup_error() {
    let (_dir, file) = team_file("missing-key", "http://127.0.0.1:9");
    let cfg = load_team(&file).unwrap();
    let err = start_team(&cfg, &host(&|_| None))
        .err()
        .expect("start must fail")
        .to_string();
    assert!(err.contains("COHORT_TEST_KEY"), "{err}");
}

/// The host a test runs the team in: the given variables and the built `cohort` binary.
fn host(vars: &dyn Fn(&str) -> Option<String>) -> Host<'_> {
    Host::new(vars, env!("CARGO_BIN_EXE_cohort"))
}

/// With an endpoint that constrains answers, each step sends its skill's schema, limited to
/// what this agent may choose, and the JSON answers run the team like tagged ones.
#[actix::test]
async fn constrained_json_answers_take_a_goal_to_a_task() {
    let stub = OpenAiStub::start().await;
    stub.push_all([
        StubResponse::reply(
            r#"{"task_instruction": {"action": "add_task", "task_name": "Haiku", "task_intention": "write one"}}"#,
        ),
    ]);
    let (_dir, file) = team_file("json", &stub.base_url());
    let cfg = load_team(&file).unwrap();
    let team = start_team(&cfg, &host(&|_| Some("sk-test".to_owned()))).unwrap();
    team.submit_goal(None, "a haiku").await.unwrap();
    wait_for_steps(&team.monitor, "the task_manager step to finish", |s| {
        with(s, "task_manager", "finished") == 1
    })
    .await;
    let tasks = team.monitor.snapshot(StateKind::Task);
    assert!(
        tasks.values().any(|t| t["task_name"] == "Haiku"),
        "{tasks:#?}"
    );

    let reqs = stub.requests();
    let goal = &reqs[0].body;
    assert_eq!(goal["messages"][0]["role"], "system");
    let format = &goal["response_format"]["json_schema"];
    assert_eq!(format["name"], "task_manager");
    let actions = &format["schema"]["properties"]["task_instruction"];
    assert!(
        actions.to_string().contains("add_task"),
        "the schema names the actions: {actions}"
    );
}

/// An endpoint that refuses a prompt as longer than its context window (llama.cpp's answer,
/// naming `n_ctx`) teaches the model its window: the step's prompt is built again under it and
/// asked once more, instead of the step failing; a second refusal fails it, saying why.
#[actix::test]
async fn a_prompt_refused_as_too_long_is_built_again_under_the_window_the_endpoint_names() {
    let stub = OpenAiStub::start().await;
    let too_long = r#"{"error":{"code":400,"message":"request (8527 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":8527,"n_ctx":8192}}"#;
    stub.push_all([
        StubResponse::error(400, too_long),
        StubResponse::reply(ADD_TASK),
    ]);
    stub.set_fallback(close_new_tasks);
    let (_dir, file) = team_file("context", &stub.base_url());
    let cfg = load_team(&file).unwrap();
    let team = start_team(&cfg, &host(&|_| Some("sk-test".to_owned()))).unwrap();
    team.submit_goal(None, "first goal").await.unwrap();
    wait_for_steps(&team.monitor, "the goal's step and the new task's", |s| {
        with(s, "task_manager", "finished") == 2
    })
    .await;
    let reqs = stub.requests();
    assert_eq!(
        reqs.len(),
        3,
        "refused, asked again, then the new task's step"
    );
    assert_eq!(
        reqs[1].prompt(),
        reqs[0].prompt(),
        "a short prompt fits as it was"
    );
    let steps = team.monitor.snapshot(StateKind::Step);
    assert!(
        steps.values().all(|s| s["execution_state"] != "failed"),
        "{steps:#?}"
    );

    // Refused again after the rebuild: the step fails and says why.
    stub.push_all([
        StubResponse::error(400, too_long),
        StubResponse::error(400, too_long),
    ]);
    team.submit_goal(None, "second goal").await.unwrap();
    wait_for_steps(
        &team.monitor,
        "the second goal's step to fail saying why",
        |s| {
            s.iter().any(|s| {
                s["execution_state"] == "failed"
                    && s["execute_result"]["error"]
                        .as_str()
                        .is_some_and(|r| r.contains("context window (8192 tokens)"))
            })
        },
    )
    .await;
}

/// `base_url_env` and `model_env` (the openai example's `COHORT_BASE_URL`/`COHORT_MODEL`) name
/// the endpoint the team talks to, and the agents' states show that model, not the file's
/// default (a team on a local Qwen showed `gpt-4o-mini` at api.openai.com).
#[actix::test]
async fn the_model_and_endpoint_set_by_env_variables_are_the_ones_called_and_shown() {
    let stub = OpenAiStub::start().await;
    stub.push(StubResponse::reply(
        r#"<task_instruction>{"action": "add_task", "task_name": "Haiku", "task_intention": "write one"}</task_instruction>"#,
    ));
    let dir = Scratch::new("rt-openai-env");
    let f = dir.join("team.yaml");
    std::fs::write(
        &f,
        "llm: {provider: openai, base_url: 'https://api.openai.com/v1', base_url_env: TEST_URL, model: gpt-4o-mini, model_env: TEST_MODEL, max_retries: 0, structured_output: off}\n\
         agents:\n  - {id: manager, role: manager, skills: [task_manager]}\n",
    )
    .unwrap();
    let cfg = load_team(&f).unwrap();
    let url = stub.base_url();
    let vars = move |v: &str| match v {
        "TEST_URL" => Some(url.clone()),
        "TEST_MODEL" => Some("qwen2.5-coder-1.5b-instruct".to_owned()),
        _ => None,
    };
    let team = start_team(&cfg, &host(&vars)).unwrap();
    let agents = team.monitor.snapshot(StateKind::Agent);
    let shown = &agents["manager"]["llm_config"];
    assert_eq!(shown["model"], "qwen2.5-coder-1.5b-instruct", "{shown}");
    assert_eq!(shown["base_url"], stub.base_url().as_str(), "{shown}");

    team.submit_goal(None, "a haiku").await.unwrap();
    wait_for_steps(&team.monitor, "the task_manager step to finish", |s| {
        with(s, "task_manager", "finished") == 1
    })
    .await;
    assert_eq!(
        stub.requests()[0].model(),
        Some("qwen2.5-coder-1.5b-instruct")
    );
}
