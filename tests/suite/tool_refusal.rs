//! A tool that refuses a call after it is made (seed 000 §4.2, §5.3), against a real MCP
//! server over streamable HTTP: a date in the wrong form is judged a parameter error by the
//! rules; with no person in the team, the model writes the arguments anew and the corrected
//! call passes, at most `reasks` times; with an operator, the refusal reaches the form in
//! plain words and the call runs with what they filled in. A refusal the rules cannot place
//! is judged by the model, and one about something else fails the step as before.

use crate::support::api_team::{api, eventually, login};
use crate::support::http::{get, post};
use crate::support::rooms::{asked, serve};
use crate::support::scratch;

use cohort::actors::{Host, Team, start_team};
use cohort::api::router;
use cohort::config::load_team;
use cohort::policy::Repair;
use cohort::state::{Executor, StepExecutionState, StepState};
use scratch::Scratch;
use serde_json::json;
use std::path::{Path, PathBuf};

/// A worker's script: plans one call of `tool` with `arguments`, then answers `extra` (the
/// model's replies to the refusal questions) in order.
pub(crate) fn worker(id: &str, tool: &str, arguments: &str, extra: &str) -> String {
    format!(
        r#"
  {id}:
    planning:
      - when: "WORK#"
        text: '<planned_step>[{{"step_intention": "Prepare", "type": "skill", "executor": "instruction_generation", "text_content": "PREP"}}, {{"step_intention": "Call", "type": "tool", "executor": "rooms", "text_content": "make the call"}}]</planned_step>'
    instruction_generation:
      - when: "PREP"
        text: '<tool_instruction>{{"tool_name": "{tool}", "arguments": {arguments}}}</tool_instruction>'
    tool_decision:
      - when: "Decide how to go on"
        text: 'Enough.<planned_step>[]</planned_step>'
    reflection:
      - when: "every planned step has run"
        text: '<planned_step>[{{"step_intention": "Report", "type": "skill", "executor": "summary", "text_content": "SUMMARY#"}}]</planned_step>'
    summary:
      - when: "SUMMARY#"
        text: '<completion_summary>Did it.</completion_summary>'
{extra}"#
    )
}

/// The team in `dir`: a manager giving each of `workers` one stage goal, the rooms server at
/// `url`, and `humans` (a YAML list, or empty).
pub(crate) fn write_team(
    dir: &Path,
    url: &str,
    workers: &[(&str, String)],
    humans: &str,
) -> PathBuf {
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    std::fs::write(
        dir.join("servers/rooms.yaml"),
        format!("name: rooms\ndescription: Rooms and desks.\nurl: {url}\n"),
    )
    .unwrap();
    let allocation: Vec<String> = workers
        .iter()
        .map(|(id, _)| format!(r#""{id}": "WORK# {id}""#))
        .collect();
    let mut script = format!(
        r#"replies:
  manager:
    task_manager:
      - when: "GOAL#"
        text: '<task_instruction>{{"action": "add_task", "task_name": "Rooms", "task_intention": "Book."}}</task_instruction>'
      - when: "was created with you as its manager"
        text: '<task_instruction>{{"action": "add_stage", "task_id": "{{{{task_id}}}}", "stages": [{{"stage_intention": "Booking", "agent_allocation": {{{}}}}}]}}</task_instruction>'
      - when: "has submitted its completion summary"
        text: '<task_instruction>{{"action": "finish_stage", "task_id": "{{{{task_id}}}}", "stage_id": "{{{{stage_id}}}}"}}</task_instruction>'
      - when: "has no stage left to run"
        text: '<task_instruction>{{"action": "finish_task", "task_id": "{{{{task_id}}}}", "task_summary": "Done."}}</task_instruction>'
"#,
        allocation.join(", ")
    );
    let mut agents = String::from(
        "  - {id: manager, name: M, role: manager, profile: p, skills: [process_message, decision, task_manager]}\n",
    );
    for (id, replies) in workers {
        script.push_str(replies);
        agents.push_str(&format!(
            "  - {{id: {id}, name: {id}, role: worker, profile: p, skills: [planning, reflection, summary, instruction_generation, tool_decision], tools: [rooms]}}\n"
        ));
    }
    std::fs::write(dir.join("script.yaml"), script).unwrap();
    let team = dir.join("team.yaml");
    std::fs::write(
        &team,
        format!(
            "name: rooms\nlanguage: en\nmcp_servers: servers\nllm:\n  provider: scripted\n  script: script.yaml\n\
             tool_approval: {{auto_run_up_to: high}}\n{humans}agents:\n{agents}"
        ),
    )
    .unwrap();
    team
}

/// The team's operator, `operator`, who signs in with `cohort-demo` (as in the examples).
pub(crate) const OPERATOR: &str = "humans:\n  - id: operator\n    name: Operator\n    role: operator\n    access: operator\n    profile: p\n    password_hash: \"$argon2id$v=19$m=19456,t=2,p=1$jUcQy16DUfKKGV/lL6/6jw$aSPXFXbbjz70sKV8AbvLk3wWNpKjUlg5S0r0DZiRjNI\"\n";

/// `agent`'s tool step once it has ended.
async fn ended_tool_step(team: &Team, agent: &str) -> StepState {
    let agent = agent.to_owned();
    eventually(&format!("{agent}'s tool step to end"), || {
        let step = team.monitor.read(|s| {
            s.steps()
                .find(|st| {
                    st.agent_id.as_str() == agent && matches!(st.executor, Executor::Tool(_))
                })
                .cloned()
        });
        async move { step.filter(|s| s.execution_state.is_over()) }
    })
    .await
}

fn repairs(step: &StepState, rule: Repair) -> Vec<String> {
    let result = step.execute_result.as_ref().expect("a result");
    result
        .repairs
        .iter()
        .filter(|f| f.rule == rule)
        .map(|f| f.what.clone())
        .collect()
}

#[actix::test]
async fn with_no_person_the_model_corrects_refused_arguments_a_bounded_number_of_times() {
    let dir = Scratch::new("tool-refusal-model");
    let (url, calls) = serve().await;
    let fixed = "    correct_arguments:\n      - '<tool_arguments>{\"room\": \"A\", \"date\": \"2026-12-07\"}</tool_arguments>'\n";
    let judged =
        "    refusal_judge:\n      - '<tool_refusal>{\"about_arguments\": false}</tool_refusal>'\n";
    let stubborn = "    correct_arguments:\n      - '<tool_arguments>{\"room\": \"B\", \"date\": \"monday\"}</tool_arguments>'\n      - '<tool_arguments>{\"room\": \"B\", \"date\": \"tuesday\"}</tool_arguments>'\n      - '<tool_arguments>{\"room\": \"B\", \"date\": \"wednesday\"}</tool_arguments>'\n      - '<tool_arguments>{\"room\": \"B\", \"date\": \"2026-12-10\"}</tool_arguments>'\n";
    let workers = [
        (
            "booker",
            worker(
                "booker",
                "book_room",
                r#"{"room": "A", "date": "next monday"}"#,
                fixed,
            ),
        ),
        (
            "desker",
            worker("desker", "reserve_desk", r#"{"desk": "4"}"#, judged),
        ),
        (
            "stubborn",
            worker(
                "stubborn",
                "book_room",
                r#"{"room": "B", "date": "soon"}"#,
                stubborn,
            ),
        ),
    ];
    let cfg = load_team(&write_team(&dir, &url, &workers, "")).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    team.submit_goal(None, "GOAL# book").await.unwrap();

    // Refused for its date, corrected by the model, passed.
    let booked = ended_tool_step(&team, "booker").await;
    assert_eq!(
        booked.execution_state,
        StepExecutionState::Finished,
        "{booked:?}"
    );
    let result = booked
        .execute_result
        .as_ref()
        .unwrap()
        .to_value()
        .to_string();
    assert!(result.contains("booked A on 2026-12-07"), "{result}");
    let fixes = repairs(&booked, Repair::ArgumentsReasked);
    assert_eq!(fixes.len(), 1, "{fixes:?}");
    assert!(
        fixes[0].contains("the tool `book_room` did not accept the value of `date`: date must be written as YYYY-MM-DD")
            && fixes[0].contains("(date changed)"),
        "told in plain words, with what changed: {fixes:?}"
    );
    assert_eq!(
        booked.instruction_content.as_ref().unwrap()["arguments"],
        json!({"room": "A", "date": "2026-12-07"}),
        "the corrected call is the step's instruction"
    );

    // Words the rules cannot place: the model judged them not about the arguments.
    let desk = ended_tool_step(&team, "desker").await;
    assert_eq!(desk.execution_state, StepExecutionState::Failed, "{desk:?}");
    let error = desk.execute_result.as_ref().unwrap().error.clone().unwrap();
    assert!(error.contains("desk 4 is taken until noon"), "{error}");
    let judged = repairs(&desk, Repair::RefusalJudged);
    assert_eq!(judged.len(), 1, "{desk:?}");
    assert!(
        judged[0].contains("something other than the arguments"),
        "{judged:?}"
    );
    assert!(repairs(&desk, Repair::ArgumentsReasked).is_empty());

    // Corrections that keep failing: three (`reasks`), then the step fails; the fourth
    // scripted correction, which would pass, is never asked for.
    let gave_up = ended_tool_step(&team, "stubborn").await;
    assert_eq!(gave_up.execution_state, StepExecutionState::Failed);
    let error = gave_up
        .execute_result
        .as_ref()
        .unwrap()
        .error
        .clone()
        .unwrap();
    assert!(
        error.contains("after the model wrote the arguments anew 3 times"),
        "{error}"
    );
    assert_eq!(repairs(&gave_up, Repair::ArgumentsReasked).len(), 3);

    assert_eq!(asked(&calls, "A"), 2, "refused once, then passed");
    assert_eq!(
        asked(&calls, "B"),
        4,
        "the first call and three corrections"
    );
    team.shutdown().await;
}

#[actix::test]
async fn with_an_operator_the_refusal_reaches_the_form_in_plain_words() {
    let dir = Scratch::new("tool-refusal-person");
    let (url, calls) = serve().await;
    // No scripted correction: were the model asked, the step would fail.
    let workers = [(
        "booker",
        worker(
            "booker",
            "book_room",
            r#"{"room": "A", "date": "next monday"}"#,
            "",
        ),
    )];
    let cfg = load_team(&write_team(&dir, &url, &workers, OPERATOR)).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    let state = api(&team, &cfg);
    let app = router(state.clone());
    let token = login(&state, "operator", "cohort-demo").await;
    team.submit_goal(None, "GOAL# book").await.unwrap();

    let asked = eventually("the refused call to wait for the operator", || {
        let app = app.clone();
        let token = token.clone();
        async move {
            let r = get(&app, "/api/approvals", &token).await;
            r.body["approvals"].as_array()?.first().cloned()
        }
    })
    .await;
    assert_eq!(asked["kind"], "params", "{asked:#}");
    assert_eq!(
        asked["reason"],
        "the tool `book_room` did not accept the value of `date`: date must be written as \
         YYYY-MM-DD, not `next monday`"
    );
    let keys: Vec<&str> = asked["form"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["key"].as_str())
        .collect();
    assert_eq!(keys, ["date"], "{asked:#}");

    let step = asked["step_id"].as_str().unwrap();
    let uri = format!("/api/step/{step}/params");
    let r = post(
        &app,
        &uri,
        Some(&token),
        json!({"values": {"date": "2026-12-07"}}),
    )
    .await;
    assert!(r.status.is_success(), "{}", r.text);
    let booked = ended_tool_step(&team, "booker").await;
    assert_eq!(
        booked.execution_state,
        StepExecutionState::Finished,
        "{booked:?}"
    );
    let result = booked
        .execute_result
        .as_ref()
        .unwrap()
        .to_value()
        .to_string();
    assert!(result.contains("booked A on 2026-12-07"), "{result}");
    assert!(repairs(&booked, Repair::ArgumentsReasked).is_empty());
    assert_eq!(crate::support::rooms::asked(&calls, "A"), 2);
    team.shutdown().await;
}

/// A call waiting for a person's form across a restart keeps what it took: the model's
/// judgement made before the restart is still on the step, beside the one made after the
/// person filled the form and the server refused again.
#[actix::test]
async fn a_call_waiting_for_its_form_keeps_its_repairs_across_a_restart() {
    use cohort::actors::start_team_stored;
    use cohort::store::{SqlStore, load};
    let dir = Scratch::new("tool-refusal-restart");
    let (url, _calls) = serve().await;
    // The desk's refusal is one the rules cannot place: the model judges it, each time, to be
    // about the desk asked for.
    let judged = "    refusal_judge:\n      - when: \"\"\n        text: '<tool_refusal>{\"about_arguments\": true, \"fields\": [\"desk\"]}</tool_refusal>'\n";
    let workers = [(
        "desker",
        worker("desker", "reserve_desk", r#"{"desk": "4"}"#, judged),
    )];
    let cfg = load_team(&write_team(&dir, &url, &workers, OPERATOR)).unwrap();
    let file = dir.join("team.db");
    let open = || async {
        let store = std::sync::Arc::new(SqlStore::open_sqlite(&file).await.unwrap());
        let loaded = load(store.as_ref()).await.unwrap();
        let host = Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"));
        let team = start_team_stored(&cfg, &host, store, loaded).unwrap();
        let state = api(&team, &cfg);
        let token = login(&state, "operator", "cohort-demo").await;
        (team, router(state), token)
    };
    let waiting = |app: axum::Router, token: String, n: usize| async move {
        eventually("the desk's call to wait for the operator", || {
            let (app, token) = (app.clone(), token.clone());
            async move {
                let r = get(&app, "/api/approvals", &token).await;
                let asked = r.body["approvals"].as_array()?.first().cloned()?;
                let uri = format!("/api/state/{}", asked["step_id"].as_str()?);
                let step = get(&app, &uri, &token).await.body;
                let judged = step["state"]["execute_result"]["repairs"].as_array()?.len();
                (judged == n).then_some(asked)
            }
        })
        .await
    };
    let (team, app, token) = open().await;
    team.submit_goal(None, "GOAL# book").await.unwrap();
    let asked = waiting(app, token, 1).await;
    team.shutdown().await;
    team.monitor.close();
    drop(team);

    let (team, app, token) = open().await;
    let step = asked["step_id"].as_str().unwrap().to_owned();
    let uri = format!("/api/step/{step}/params");
    let r = post(&app, &uri, Some(&token), json!({"values": {"desk": "5"}})).await;
    assert!(r.status.is_success(), "{}", r.text);
    // Refused again and judged again: both judgements are the step's.
    let again = waiting(app, token, 2).await;
    assert_eq!(again["step_id"], step.as_str());
    team.shutdown().await;
}
