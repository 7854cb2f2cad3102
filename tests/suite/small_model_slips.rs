//! What a small real model gets wrong (each seen on Qwen2.5-Coder 1.5B), answered over real
//! HTTP by an OpenAI-compatible stub in the constrained JSON format, and how the runtime
//! keeps the goal going: a think answer that hands back its instruction is asked again; a
//! summary that does is composed from the agent's own results; a stage notice answered with
//! `add_stage` (which would leave the stage open for ever) is asked again, and its schema does
//! not offer `add_stage` in the first place; a finished stage asked for again runs again (a new
//! try the judgement chose), past its third run it is refused, and the task's judgement is
//! acted on once more with the refusal; its summary, news of the work without the poem, is
//! kept as written with the stages' results beside it (`summary_written`).

use crate::support::openai_stub;
use crate::support::scratch;

use cohort::actors::Host;
use cohort::config::load_team;
use cohort::run::{RunOptions, RunOutcome, run_goal};
use openai_stub::{OpenAiStub, RecordedRequest, StubResponse};
use scratch::Scratch;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;

const POEM: &str = "Cold rain on the eaves / the maple lets go its red / one leaf at a time";

/// The manager's task summary: news of the work, none of its result.
const NEWS: &str = "The haiku is written and submitted by the writer agent.";

/// The team on the stub at `base_url`, in a fresh folder: the folder's guard and the file.
fn team_file(base_url: &str) -> (Scratch, std::path::PathBuf) {
    let dir = Scratch::new("slips");
    let f = dir.join("team.yaml");
    std::fs::write(
        &f,
        format!(
            "llm: {{provider: openai, base_url: '{base_url}', model: qwen2.5-coder-1.5b-instruct, max_retries: 1}}\n\
             agents:\n\
             \x20 - {{id: manager, name: Mira, role: manager, skills: [task_manager, send_message]}}\n\
             \x20 - {{id: writer, name: Wren, role: writer, skills: [planning, reflection, summary, think]}}\n\
             repairs: small_model\n"
        ),
    )
    .unwrap();
    (dir, f)
}

/// The skill a request is for and its answer's schema (free-text skills have none: the step's
/// executor is read from the prompt).
fn skill_of(req: &RecordedRequest) -> (String, &Value) {
    let format = &req.body["response_format"]["json_schema"];
    let skill = match format["name"].as_str() {
        Some(name) => name.to_owned(),
        None => req
            .prompt()
            .unwrap_or_default()
            .split("- executor: ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_default()
            .to_owned(),
    };
    (skill, &format["schema"])
}

/// The one id a task_manager schema allows for `field` (the runtime names it).
fn allowed(schema: &Value, field: &str) -> Option<String> {
    let text = schema.to_string();
    let at = text.find(&format!("\"{field}\":{{\"enum\":[\""))?;
    let rest = &text[at + field.len() + 13..];
    Some(rest[..rest.find('"')?].to_owned())
}

/// The answers of a small model that slips where the real one did.
fn answer(req: &RecordedRequest, seen: &mut HashMap<String, usize>) -> StubResponse {
    let (skill, schema) = skill_of(req);
    let n = {
        let n = seen.entry(skill.clone()).or_default();
        *n += 1;
        *n
    };
    // The current step's section (the history above it may quote earlier notices).
    let prompt = cohort::bench::model_stub::current_step(req.prompt().unwrap_or_default());
    let stage_again = |task: &str| {
        json!({"action": "add_stage", "task_id": task,
            "stages": [{"stage_intention": "Write the haiku",
                        "agent_allocation": {"writer": "Write the haiku"}}]})
    };
    let reply = match skill.as_str() {
        "task_manager" => match (allowed(schema, "task_id"), allowed(schema, "stage_id")) {
            (None, _) => json!({"task_instruction": {"action": "add_task",
                "task_name": "Haiku", "task_intention": "Write a haiku about autumn rain"}}),
            (Some(task), None) if prompt.contains("was created with you as its manager") => {
                json!({"task_instruction": stage_again(&task)})
            }
            // The stage is complete: first the slip (the stage again), then the right call.
            (Some(task), Some(_)) if n == 3 => {
                json!({"goal_reached": false, "task_instruction": stage_again(&task)})
            }
            (Some(task), Some(stage)) => json!({"goal_reached": true, "task_instruction": {
                "action": "finish_stage", "task_id": task, "stage_id": stage}}),
            // Judging the task: the finished stage again (run twice more, then refused by
            // SyncState), then the end.
            (Some(task), None) if !prompt.contains("has run 3 times") => {
                json!({"goal_reached": false, "task_instruction": stage_again(&task)})
            }
            // A summary that gives news of the work and none of its result: the stages'
            // results are added beside it (`stage_reports_appended`).
            (Some(task), None) => json!({"goal_reached": true, "task_instruction": {
                "action": "finish_task", "task_id": task, "task_summary": NEWS,
                "outcome": "finished"}}),
        },
        "planning" => json!({"planned_step": [
            {"step_intention": "Write the poem", "type": "skill", "executor": "think",
             "text_content": "Write the haiku about autumn rain"},
            {"step_intention": "Check it", "type": "skill", "executor": "reflection",
             "text_content": "Check the haiku"}]}),
        // Free text, asked for in its tag: first its own instruction handed back, then the poem.
        "think" if n == 1 => {
            return StubResponse::reply("<think>Write the haiku about autumn rain.</think>");
        }
        "think" => return StubResponse::reply(&format!("<think>{POEM}</think>")),
        "summary" => {
            return StubResponse::reply(
                "<completion_summary>Summarise my work in this stage</completion_summary>",
            );
        }
        "reflection" => json!({"planned_step": []}),
        other => panic!("no answer scripted for {other:?}"),
    };
    StubResponse::reply(&reply.to_string())
}

fn host(vars: &dyn Fn(&str) -> Option<String>) -> Host<'_> {
    Host::new(vars, std::path::PathBuf::from(env!("CARGO_BIN_EXE_cohort")))
}

#[actix::test]
async fn a_goal_reaches_its_end_through_the_slips_of_a_small_model() {
    let stub = OpenAiStub::start().await;
    let seen = Mutex::new(HashMap::new());
    stub.set_fallback(move |req| answer(req, &mut seen.lock().unwrap()));
    let (_dir, file) = team_file(&stub.base_url());
    let cfg = load_team(&file).unwrap();
    let report = run_goal(
        &cfg,
        "Write a haiku about autumn rain",
        &RunOptions::default(),
        &host(&|_| None),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);
    let s = &report.states;
    // The manager's words are kept as written; the poem the stages produced is beside them,
    // the runtime's part, and the task is finished (the operator got the result).
    let task = s["task"]
        .as_object()
        .unwrap()
        .values()
        .find(|t| t["task_name"] == "Haiku")
        .unwrap();
    assert_eq!(task["execution_state"], "finished", "{task}");
    assert_eq!(task["task_summary"], NEWS, "{task}");
    assert_eq!(
        task["summary_written"]["written"], "results_added",
        "{task}"
    );
    let reports = task["summary_written"]["reports"].as_str().unwrap();
    assert!(reports.contains("Cold rain on the eaves"), "{reports}");
    assert_eq!(task["repairs"]["stage_reports_appended"], 1, "{task}");
    let steps: Vec<&Value> = s["step"].as_object().unwrap().values().collect();
    let of = |executor: &str| -> Vec<&Value> {
        steps
            .iter()
            .copied()
            .filter(|st| st["executor"] == executor)
            .collect()
    };

    // Free text is asked for in its tag, never constrained by a schema.
    assert!(stub.requests().iter().all(|r| {
        let (skill, _) = skill_of(r);
        (skill == "think" || skill == "summary") == r.body.get("response_format").is_none()
    }));

    // The echoed thought was asked again with the reason, and the poem kept (the stage's
    // later runs thought it at once).
    let think = of("think");
    assert_eq!(think.len(), 3, "{think:#?}");
    let echoed = think
        .iter()
        .find_map(|t| t["execute_result"]["reasked"].as_array())
        .expect("a thought was asked again");
    assert!(
        echoed[0]["error"]
            .as_str()
            .unwrap()
            .contains("repeats this step's instruction")
    );
    assert!(think.iter().all(|t| t["execute_result"]["think"] == POEM));

    // The echoed summaries were composed from the writer's results: the manager saw the poem.
    // The stage ran three times (the judgement's new tries); a fourth run was refused.
    let stages = s["stage"].as_object().unwrap();
    assert_eq!(stages.len(), 3, "the stage ran three times, not a fourth");
    for stage in stages.values() {
        // The report says so in a typed field, not in words the runtime put in the writer's:
        // its own words are empty, its work's result is the report.
        assert_eq!(stage["completion_summary"]["writer"], "");
        assert_eq!(stage["completion_written"]["writer"], "composed");
        assert_eq!(stage["completion_results"]["writer"], json!([POEM]));
        assert_eq!(stage["execution_state"], "finished");
    }
    // The manager read each composed report as such, with the poem.
    let told = stub.requests().iter().any(|r| {
        let prompt: String = r.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_str())
            .collect();
        skill_of(r).0 == "task_manager"
            && prompt.contains("Composed by the runtime from writer's results")
            && prompt.contains(POEM)
    });
    assert!(told, "the manager was shown the composed reports");

    // The stage notice's add_stage was asked again; its schema never offered add_stage, and
    // asks for the verdict before the action.
    let decided = of("task_manager")
        .into_iter()
        .find(|st| {
            st["execute_result"]["task_instruction"]["action"] == "finish_stage"
                && st["execute_result"]["reasked"].is_array()
        })
        .expect("a stage was finished after its notice's add_stage was asked again");
    let tries = decided["execute_result"]["reasked"].as_array().unwrap();
    assert!(
        tries[0]["error"].as_str().unwrap().contains("finish_stage"),
        "{tries:#?}"
    );
    let refused = of("task_manager")
        .into_iter()
        .filter(|st| st["execution_state"] == "failed")
        .map(|st| {
            st["execute_result"]["error"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect::<Vec<_>>();
    assert!(
        refused.len() == 1 && refused[0].contains("has run 3 times"),
        "{refused:#?}"
    );
    let stage_schema = stub
        .requests()
        .into_iter()
        .map(|r| skill_of(&r).1.clone())
        .find(|schema| allowed(schema, "stage_id").is_some())
        .unwrap();
    assert!(
        !stage_schema.to_string().contains("\"add_stage\""),
        "{stage_schema}"
    );
    assert_eq!(
        stage_schema["required"][0], "goal_reached",
        "{stage_schema}"
    );
}
